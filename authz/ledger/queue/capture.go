package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"modelgate/authz/ledger"
)

// CaptureWriter is where Captures writes: the part of
// ledger.CaptureStore it uses.
type CaptureWriter interface {
	// SaveCaptures keeps captures all or none, so that a failed batch can
	// be retried whole, and skips requests with a capture kept already,
	// so that one retried after its reply was lost stores nothing twice.
	// Its error is ledger.ErrRefused when the store refused a capture for
	// its content.
	SaveCaptures(ctx context.Context, cs []ledger.Capture) error
}

// Captures is an extproc.CaptureSink that queues payload captures and
// writes them to the store as the Ledger does usage records, so that a
// store outage delays captures instead of losing them: SaveCapture only
// enqueues (waiting at most FullWait when the queue is full), and Run
// writes a batch in one call, retrying it whole with backoff until the
// store recovers or Close's deadline passes.
//
// A capture the store refuses for its content (ledger.ErrRefused) would
// fail its batch on every retry, and hold back every capture behind it:
// a refused batch is written again in halves, down to the captures the
// store refuses on their own, which are left out, logged and counted in
// modelgate_capture_records_dropped_total{reason="refused"} (the writer
// being done with them, modelgate_capture_records_written_total counts
// them too). Captures that cannot be queued or written are counted in
// modelgate_capture_records_dropped_total.
type Captures struct {
	w *writer[ledger.Capture]
}

var (
	errCapturesFull   = &kindError{"capture queue full", ErrFull}
	errCapturesClosed = &kindError{"capture writer already running or closed", ErrClosed}
)

// NewCaptures returns a capture writer writing to sink, with its metrics
// registered on reg (nil registers none). Call Run to start writing and
// Close to flush.
func NewCaptures(sink CaptureWriter, reg prometheus.Registerer, cfg Config) (*Captures, error) {
	if sink == nil {
		return nil, errors.New("ledger: a capture writer needs a store")
	}
	w, err := newWriter(captureKind(sink), reg, cfg, Config{QueueSize: 1024, MaxBatch: 64})
	if err != nil {
		return nil, err
	}
	return &Captures{w: w}, nil
}

// captureKind writes a batch of captures to sink in one call, all or
// none; the writer sets aside a capture the store refuses.
func captureKind(sink CaptureWriter) kind[ledger.Capture] {
	return kind[ledger.Capture]{
		write: func(ctx context.Context, batch []ledger.Capture) (int, error) {
			if err := sink.SaveCaptures(ctx, batch); err != nil {
				return 0, err // none stored: retried whole, or halved if refused
			}
			return len(batch), nil
		},
		sanitize:  sanitizeCapture,
		requestID: func(c *ledger.Capture) string { return c.RequestID },
		metric:    "modelgate_capture",
		records:   "Payload captures",
		noun:      "capture",
		name:      "capture writer",
		errFull:   errCapturesFull,
		errClosed: errCapturesClosed,
	}
}

// SaveCapture implements extproc.CaptureSink. It queues the capture and
// returns; when the queue is full it waits up to FullWait (or until ctx
// ends) for room, then drops the capture and returns an error that is
// ErrFull. Once the writer is closed it writes the capture to the store
// itself, for requests that outlive a shutdown's grace period.
func (c *Captures) SaveCapture(ctx context.Context, rec ledger.Capture) error {
	return c.w.put(ctx, rec)
}

// Run writes queued captures until Close, then writes what is left and
// returns nil. If ctx ends first, or Close's deadline passes, the captures
// still queued are dropped and counted. Call it once: it returns an error
// that is ErrClosed at once if the writer runs already (Close runs it
// when Run has not started).
func (c *Captures) Run(ctx context.Context) error {
	return c.w.run(ctx)
}

// Close stops queueing (later captures are written directly) and waits
// until every queued capture is written or ctx ends; then it gives up on
// the rest, counts them as dropped and says how many in its error. It
// runs the writer itself when Run was never called.
func (c *Captures) Close(ctx context.Context) error {
	if n := c.w.close(ctx); n > 0 {
		return fmt.Errorf("closing the capture writer: %d captures not written", n)
	}
	return nil
}

// sanitizeCapture makes the free-form strings of a capture storable (see
// storable): the bodies too, which a client may send in any encoding.
func sanitizeCapture(c *ledger.Capture) {
	for _, s := range []*string{&c.RequestID, &c.AccountID, &c.KeyID, &c.Endpoint, &c.Model, &c.Request, &c.Response} {
		storable(s)
	}
}
