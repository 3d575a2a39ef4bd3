// Package ledger is the usage ledger's writer: it takes one usage record
// per request without blocking the request, and writes them to the store
// in batches, retrying failed writes whole.
package ledger

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"modelgate/authz"
)

// BatchWriter is where a Ledger writes; authz.Store implementations
// have it.
type BatchWriter interface {
	// AppendUsageBatch appends records in one transaction: all or none,
	// so that a failed batch can be retried whole without duplicates.
	AppendUsageBatch(ctx context.Context, recs []authz.UsageRecord) error
}

// ErrFull is returned by Ledger.AppendUsage for a record it dropped
// because the queue stayed full for Config.FullWait.
var ErrFull = errors.New("usage ledger queue full")

// ErrClosed is returned by Ledger.Run when another Run, or Close,
// already runs the writer.
var ErrClosed = errors.New("usage ledger already running or closed")

// Config holds the Ledger's knobs.
type Config struct {
	// QueueSize is how many records may wait for the writer; zero means
	// 16384, several seconds of heavy traffic while the store is slow or
	// away.
	QueueSize int
	// MaxBatch is the most records one write carries; zero means 500.
	MaxBatch int
	// FlushInterval is how long the first record of a batch waits for
	// others before the batch is written; zero means 100ms. Records reach
	// the store that much later, in a tenth of the writes under load.
	FlushInterval time.Duration
	// FullWait is how long AppendUsage waits for room in a full queue
	// before it drops the record; zero means 100ms, negative drops at once.
	FullWait time.Duration
	// WriteTimeout bounds one batch write; zero means 10s.
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
	store BatchWriter
	cfg   Config
	log   *zap.Logger
	m     metrics
	// queue holds pointers: a buffer of QueueSize records, pointers and
	// all, would be a few MiB the garbage collector scans every cycle,
	// most of it empty.
	queue chan *authz.UsageRecord

	// mu is held shared while a record is enqueued and exclusively to
	// close, so that nothing enters the queue after the writer's last look.
	mu      sync.RWMutex
	closed  bool
	closing chan struct{} // closed with closed: write what is queued, then stop

	started   atomic.Bool   // Run, or Close in its place, owns the writer
	done      chan struct{} // closed when the writer has stopped
	abort     chan struct{} // closed when Close's deadline passed
	abortOnce sync.Once
	lost      atomic.Int64 // records the writer gave up on
}

// New returns a ledger writing to store, with its metrics registered
// on reg (nil registers none). Call Run to start writing and Close to
// flush.
func New(store BatchWriter, reg prometheus.Registerer, cfg Config) (*Ledger, error) {
	if store == nil {
		return nil, errors.New("extproc: a ledger needs a store")
	}
	cfg = withDefaults(cfg)
	l := &Ledger{store: store, cfg: cfg, log: cfg.Logger, queue: make(chan *authz.UsageRecord, cfg.QueueSize),
		closing: make(chan struct{}), done: make(chan struct{}), abort: make(chan struct{})}
	l.m = newMetrics(func() float64 { return float64(len(l.queue)) })
	if reg != nil {
		if err := l.m.register(reg); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func withDefaults(cfg Config) Config {
	setDefault := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1 << 14
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 500
	}
	setDefault(&cfg.FlushInterval, 100*time.Millisecond)
	if cfg.FullWait == 0 { // negative means drop at once
		cfg.FullWait = 100 * time.Millisecond
	}
	setDefault(&cfg.WriteTimeout, 10*time.Second)
	setDefault(&cfg.MinBackoff, 50*time.Millisecond)
	setDefault(&cfg.MaxBackoff, 5*time.Second)
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg
}

// AppendUsage implements extproc.UsageRecorder. It queues the record and returns;
// when the queue is full it waits up to FullWait (or until ctx ends) for
// room, then drops the record and returns ErrFull. Once the ledger
// is closed it writes the record to the store itself, for requests that
// outlive a shutdown's grace period.
func (l *Ledger) AppendUsage(ctx context.Context, rec authz.UsageRecord) error {
	if rec.ID == "" { // retried batches then count once
		rec.ID = newID()
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return l.appendClosed(ctx, rec)
	}
	defer l.mu.RUnlock()
	r := &rec
	select {
	case l.queue <- r:
		l.m.queued.Inc()
		return nil
	default:
	}
	if l.cfg.FullWait > 0 {
		t := time.NewTimer(l.cfg.FullWait)
		defer t.Stop()
		select {
		case l.queue <- r:
			l.m.queued.Inc()
			return nil
		case <-t.C:
		case <-ctx.Done():
		}
	}
	l.m.droppedFull.Inc()
	return ErrFull
}

func (l *Ledger) appendClosed(ctx context.Context, rec authz.UsageRecord) error {
	batch := sanitize([]authz.UsageRecord{rec})
	if err := l.store.AppendUsageBatch(ctx, batch); err != nil {
		l.m.droppedClosed.Inc()
		return fmt.Errorf("writing usage after the ledger closed: %w", err)
	}
	l.m.written.Inc()
	return nil
}

// Run writes queued records until Close, then writes what is left and
// returns nil. If ctx ends first, or Close's deadline passes, the records
// still queued are dropped and counted. Call it once: it returns
// ErrClosed at once if the writer runs already (Close runs it when
// Run has not started).
func (l *Ledger) Run(ctx context.Context) error {
	if !l.started.CompareAndSwap(false, true) {
		return ErrClosed
	}
	l.run(ctx)
	return ctx.Err()
}

// Close stops queueing (later records are written directly) and waits
// until every queued record is written or ctx ends; then it gives up on
// the rest, counts them as dropped and says how many in its error. It runs
// the writer itself when Run was never called.
func (l *Ledger) Close(ctx context.Context) error {
	l.shut()
	if l.started.CompareAndSwap(false, true) {
		l.run(ctx)
	} else {
		select {
		case <-l.done:
		case <-ctx.Done():
			l.abortOnce.Do(func() { close(l.abort) })
			<-l.done
		}
	}
	if n := l.lost.Load(); n > 0 {
		return fmt.Errorf("closing the usage ledger: %d records not written", n)
	}
	return nil
}

// shut marks the ledger closed once no enqueue is in progress.
func (l *Ledger) shut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.closing)
	}
}

// run is the writer loop.
func (l *Ledger) run(ctx context.Context) {
	defer close(l.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.abort:
			cancel()
		case <-ctx.Done():
		}
	}()
	batch := make([]authz.UsageRecord, 0, l.cfg.MaxBatch)
	for more := true; more; {
		batch, more = l.next(ctx, batch[:0])
		if len(batch) > 0 {
			l.write(ctx, batch)
		}
	}
	l.shut() // when ctx ended first: later records go straight to the store
	n := len(l.queue)
	for range n {
		<-l.queue
	}
	l.giveUp(n, ctx.Err())
}

// next fills batch with the next records: it waits for a first one, then
// up to FlushInterval for more, but not at all once the ledger is closing.
// It reports false when nothing more will come: the ledger is closed and
// its queue empty, or ctx ended.
func (l *Ledger) next(ctx context.Context, batch []authz.UsageRecord) ([]authz.UsageRecord, bool) {
	select {
	case r := <-l.queue:
		batch = append(batch, *r)
	case <-l.closing:
		batch = l.fill(batch)
		return batch, len(batch) > 0
	case <-ctx.Done():
		return batch, false
	}
	// The rest is taken in bulk, not a record at a time: a wait on the
	// queue would wake this goroutine for every request.
	if batch = l.fill(batch); len(batch) == cap(batch) {
		return batch, true
	}
	// A partial batch waits for FlushInterval, or until the records that
	// come meanwhile fill it: a full batch is written at once, also when
	// its first records came before the others.
	t := time.NewTimer(l.cfg.FlushInterval)
	defer t.Stop()
	for len(batch) < cap(batch) {
		select {
		case r := <-l.queue:
			batch = l.fill(append(batch, *r))
		case <-t.C:
			return l.fill(batch), true
		case <-l.closing:
			return l.fill(batch), true
		case <-ctx.Done():
			return batch, true // write gives it up and counts it
		}
	}
	return batch, true
}

// fill adds what is queued without waiting.
func (l *Ledger) fill(batch []authz.UsageRecord) []authz.UsageRecord {
	for len(batch) < cap(batch) {
		select {
		case r := <-l.queue:
			batch = append(batch, *r)
		default:
			return batch
		}
	}
	return batch
}

// write writes a batch, retrying with jittered exponential backoff until
// it succeeds or ctx ends.
func (l *Ledger) write(ctx context.Context, batch []authz.UsageRecord) {
	sanitize(batch)
	l.m.batchSize.Observe(float64(len(batch)))
	wait := l.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		err := l.attempt(ctx, batch)
		if err == nil {
			l.m.written.Add(float64(len(batch)))
			if attempt > 1 {
				l.log.Info("usage batch written after retries", zap.Int("records", len(batch)), zap.Int("attempts", attempt))
			}
			return
		}
		l.m.writeErrors.Inc()
		if ctx.Err() != nil {
			l.giveUp(len(batch), err)
			return
		}
		l.log.Warn("writing usage batch", zap.Int("records", len(batch)), zap.Int("attempt", attempt),
			zap.Duration("retry_in", wait), zap.Error(err))
		t := time.NewTimer(wait/2 + rand.N(wait/2+1)) // jitter keeps replicas from retrying in step
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			l.giveUp(len(batch), ctx.Err())
			return
		}
		wait = min(2*wait, l.cfg.MaxBackoff)
	}
}

func (l *Ledger) attempt(ctx context.Context, batch []authz.UsageRecord) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	err := l.store.AppendUsageBatch(ctx, batch)
	l.m.batchDuration.Observe(time.Since(start).Seconds())
	return err
}

func (l *Ledger) giveUp(n int, cause error) {
	if n == 0 {
		return
	}
	l.lost.Add(int64(n))
	l.m.droppedAborted.Add(float64(n))
	l.log.Error("usage records not written", zap.Int("records", n), zap.Error(cause))
}

// sanitize makes the free-form strings of records storable: PostgreSQL
// refuses invalid UTF-8 and NUL in text, and one such request id (a
// client-sent header) would otherwise fail its whole batch forever.
func sanitize(batch []authz.UsageRecord) []authz.UsageRecord {
	clean := func(s *string) {
		if !utf8.ValidString(*s) || strings.IndexByte(*s, 0) >= 0 {
			*s = strings.ReplaceAll(strings.ToValidUTF8(*s, "\uFFFD"), "\x00", "\uFFFD")
		}
	}
	for i := range batch {
		r := &batch[i]
		for _, s := range []*string{&r.RequestID, &r.ClientRequestID, &r.KeyID, &r.AccountID, &r.Endpoint, &r.Model, &r.Backend} {
			clean(s)
		}
	}
	return batch
}

// metrics are the ledger's Prometheus metrics; labels are bounded
// (the drop reason).
type metrics struct {
	queued, written, writeErrors               prometheus.Counter
	droppedFull, droppedClosed, droppedAborted prometheus.Counter
	dropped                                    *prometheus.CounterVec
	queueLen                                   prometheus.GaugeFunc
	batchDuration, batchSize                   prometheus.Histogram
}

func newMetrics(queueLen func() float64) metrics {
	m := metrics{
		queued: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgate_ledger_records_queued_total",
			Help: "Usage records accepted into the ledger's queue."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgate_ledger_records_written_total",
			Help: "Usage records written to the store."}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgate_ledger_write_errors_total",
			Help: "Failed batch writes; each is retried."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "modelgate_ledger_records_dropped_total",
			Help: "Usage records lost: the queue stayed full (full), a write after close failed (closed), or shutdown gave up on them (aborted). The goal is zero."},
			[]string{"reason"}),
		queueLen: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgate_ledger_queue_records",
			Help: "Usage records waiting to be written."}, queueLen),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "modelgate_ledger_batch_write_duration_seconds",
			Help:    "Time one batch write took, failed attempts included.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "modelgate_ledger_batch_records",
			Help: "Records per batch.", Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}}),
	}
	m.droppedFull = m.dropped.WithLabelValues("full")
	m.droppedClosed = m.dropped.WithLabelValues("closed")
	m.droppedAborted = m.dropped.WithLabelValues("aborted")
	return m
}

func (m metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.queued, m.written, m.writeErrors, m.dropped, m.queueLen, m.batchDuration, m.batchSize} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
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
