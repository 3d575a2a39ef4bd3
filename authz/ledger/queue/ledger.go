package queue

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"modelgate/authz/ledger"
)

// BatchWriter is where a Ledger writes: the part of ledger.UsageStore
// it uses.
type BatchWriter interface {
	// AppendUsageBatch appends records in one transaction: all or none,
	// so that a failed batch can be retried whole without duplicates.
	AppendUsageBatch(ctx context.Context, recs []ledger.UsageRecord) error
}

// ErrFull is returned by Ledger.AppendUsage for a record it dropped
// because the queue stayed full for Config.FullWait. Captures.SaveCapture's
// error for a dropped capture is ErrFull too, as errors.Is reports.
var ErrFull = errors.New("usage ledger queue full")

// ErrClosed is returned by Ledger.Run when another Run, or Close,
// already runs the writer; errors.Is reports Captures.Run's error so too.
var ErrClosed = errors.New("usage ledger already running or closed")

// Config holds the knobs of a Ledger, and of Captures.
type Config struct {
	// QueueSize is how many records may wait for the writer; zero means
	// 16384, several seconds of heavy traffic while the store is slow or
	// away. For Captures zero means 1024: a capture holds two bodies of up
	// to observability.capture.max_bytes (64 KiB by default), so a full
	// queue takes up to 128 MiB, where 16384 would take 2 GiB.
	QueueSize int
	// MaxBatch is the most records one write carries; zero means 500, for
	// Captures 64: a batch of captures is one statement, which at the
	// default max_bytes carries up to 8 MiB of bodies. Its round trip is
	// then a small part of its time, most of which goes to the bodies
	// (PostgreSQL compressing and logging them): a larger batch would add
	// to the bodies copied at once more than to the rate.
	MaxBatch int
	// FlushInterval is how long the first record of a batch waits for
	// others before the batch is written; zero means 100ms. Records reach
	// the store that much later, in a tenth of the writes under load.
	FlushInterval time.Duration
	// FullWait is how long AppendUsage (SaveCapture) waits for room in a
	// full queue before it drops the record; zero means 100ms, negative drops at once.
	FullWait time.Duration
	// WriteTimeout bounds one batch write; zero means 10s, for a batch
	// of captures (up to 8 MiB) ample time on a database that is up.
	// A write that times out is retried; for Captures, what it stored
	// of a refused batch's halves before then stays stored.
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause before retrying a failed
	// write, which doubles from the one to the other; zero means 50ms and
	// 5s.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives write failures; nil logs nothing.
	Logger *zap.Logger
}

// Ledger is a UsageRecorder that queues records and writes them to the
// store in batches, so that the request path never waits for a database:
// AppendUsage only enqueues (waiting at most FullWait when the queue is
// full), and Run writes. Failed writes are retried with backoff until they
// succeed or the ledger is closed and Close's deadline passes, so a store
// that fails and recovers loses nothing. Records that cannot be queued or
// written are counted in modelgate_ledger_records_dropped_total. The one
// way to store a record twice is a commit whose reply is lost: its batch
// is retried.
type Ledger struct {
	w *writer[ledger.UsageRecord]
}

// New returns a ledger writing to store, with its metrics registered
// on reg (nil registers none). Call Run to start writing and Close to
// flush.
func New(store BatchWriter, reg prometheus.Registerer, cfg Config) (*Ledger, error) {
	if store == nil {
		return nil, errors.New("extproc: a ledger needs a store")
	}
	w, err := newWriter(usageKind(store), reg, cfg, Config{QueueSize: 1 << 14, MaxBatch: 500})
	if err != nil {
		return nil, err
	}
	return &Ledger{w: w}, nil
}

// usageKind writes usage records to store, a batch in one transaction.
func usageKind(store BatchWriter) kind[ledger.UsageRecord] {
	return kind[ledger.UsageRecord]{
		write: func(ctx context.Context, batch []ledger.UsageRecord) (int, error) {
			if err := store.AppendUsageBatch(ctx, batch); err != nil {
				return 0, err // all or none
			}
			return len(batch), nil
		},
		sanitize: sanitizeUsage, requestID: func(r *ledger.UsageRecord) string { return r.RequestID },
		metric: "modelgate_ledger", records: "Usage records", noun: "usage", name: "ledger",
		errFull: ErrFull, errClosed: ErrClosed,
	}
}

// AppendUsage implements extproc.UsageRecorder. It queues the record and returns;
// when the queue is full it waits up to FullWait (or until ctx ends) for
// room, then drops the record and returns ErrFull. Once the ledger
// is closed it writes the record to the store itself, for requests that
// outlive a shutdown's grace period.
func (l *Ledger) AppendUsage(ctx context.Context, rec ledger.UsageRecord) error {
	if rec.ID == "" { // retried batches then count once
		rec.ID = newID()
	}
	return l.w.put(ctx, rec)
}

// Run writes queued records until Close, then writes what is left and
// returns nil. If ctx ends first, or Close's deadline passes, the records
// still queued are dropped and counted. Call it once: it returns
// ErrClosed at once if the writer runs already (Close runs it when
// Run has not started).
func (l *Ledger) Run(ctx context.Context) error {
	return l.w.run(ctx)
}

// Close stops queueing (later records are written directly) and waits
// until every queued record is written or ctx ends; then it gives up on
// the rest, counts them as dropped and says how many in its error. It runs
// the writer itself when Run was never called.
func (l *Ledger) Close(ctx context.Context) error {
	if n := l.w.close(ctx); n > 0 {
		return fmt.Errorf("closing the usage ledger: %d records not written", n)
	}
	return nil
}

// sanitizeUsage makes the strings of a record storable (see storable):
// every one of them, since most come from what a client sent
// (TestSanitizeUsageCoversEveryString holds new fields to it).
func sanitizeUsage(r *ledger.UsageRecord) {
	for _, s := range []*string{&r.ID, &r.RequestID, &r.ClientRequestID, &r.SessionID, &r.KeyID, &r.AccountID, &r.Endpoint, &r.Model,
		&r.RequestedModel, &r.ProviderModel, &r.Backend} {
		storable(s)
	}
}

// newID is a record id: "use_", 16 hex digits random per process and 16
// counting its records. Unique across replicas and restarts as random ids
// are, without a read of the system's randomness per request.
func newID() string {
	var b [len("use_") + 32]byte
	copy(b[:], "use_")
	hex.Encode(b[4:20], idPrefix[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], idCount.Add(1))
	hex.Encode(b[20:], n[:])
	return string(b[:])
}

var (
	idPrefix = func() (p [8]byte) {
		crand.Read(p[:]) //nolint:errcheck // crypto/rand.Read never fails
		return p
	}()
	idCount atomic.Uint64
)
