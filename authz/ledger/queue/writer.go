package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"modelgate/authz/ledger"
)

// kind is what a writer writes: how to store a batch of its records, and
// its names in metrics, logs and errors. The usage ledger and the capture
// writer are two kinds of one writer.
type kind[T any] struct {
	// write stores batch in order. It returns how many of the batch's
	// first records are stored, all of them when err is nil: a retry then
	// writes only the rest, so a store without batches never gets a
	// record twice.
	write func(ctx context.Context, batch []T) (int, error)
	// sanitize makes a record's strings storable (see storable).
	sanitize func(*T)
	// requestID names the request a record is of, in the log line of one
	// the store refused.
	requestID func(*T) string
	// metric prefixes the metrics' names: "modelgate_ledger".
	metric string
	// records starts the metrics' help texts: "Usage records".
	records string
	// noun names a record in logs and errors: "usage".
	noun string
	// name is the writer in help texts and errors: "ledger".
	name string
	// errFull is returned for a record dropped because the queue stayed
	// full, errClosed by a second Run.
	errFull, errClosed error
}

// writer queues records without blocking the caller and writes them to a
// store in batches from a goroutine of its own (Run): put only enqueues,
// waiting at most FullWait when the queue is full. A failed write is
// retried, the records not yet stored only, with jittered exponential
// backoff until it succeeds or the writer is closed and Close's deadline
// passes, so a store that fails and recovers loses nothing. Records that
// cannot be queued or written are counted in the dropped metric.
type writer[T any] struct {
	kind kind[T]
	cfg  Config
	log  *zap.Logger
	m    metrics
	// queue holds pointers: a buffer of QueueSize records, pointers and
	// all, would be a few MiB the garbage collector scans every cycle,
	// most of it empty.
	queue chan *T

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

// newWriter returns a writer of k with cfg, its zero values set to def's
// and then to the defaults of all kinds; its metrics are registered on
// reg (nil registers none).
func newWriter[T any](k kind[T], reg prometheus.Registerer, cfg, def Config) (*writer[T], error) {
	cfg = withDefaults(cfg, def)
	w := &writer[T]{kind: k, cfg: cfg, log: cfg.Logger, queue: make(chan *T, cfg.QueueSize),
		closing: make(chan struct{}), done: make(chan struct{}), abort: make(chan struct{})}
	w.m = newMetrics(k.metric, k.records, k.name, func() float64 { return float64(len(w.queue)) })
	if reg != nil {
		if err := w.m.register(reg); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// withDefaults sets the zero values of cfg: the queue's size and the batch
// size to def's, which differ by kind, the rest to values all kinds share.
func withDefaults(cfg, def Config) Config {
	setDefault := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = def.QueueSize
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = def.MaxBatch
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

// put queues rec and returns; when the queue is full it waits up to
// FullWait (or until ctx ends) for room, then drops the record and returns
// errFull. Once the writer is closed it writes the record to the store
// itself, for requests that outlive a shutdown's grace period.
func (w *writer[T]) put(ctx context.Context, rec T) error {
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return w.writeClosed(ctx, rec)
	}
	defer w.mu.RUnlock()
	r := &rec
	select {
	case w.queue <- r:
		w.m.queued.Inc()
		return nil
	default:
	}
	if w.cfg.FullWait > 0 {
		t := time.NewTimer(w.cfg.FullWait)
		defer t.Stop()
		select {
		case w.queue <- r:
			w.m.queued.Inc()
			return nil
		case <-t.C:
		case <-ctx.Done():
		}
	}
	w.m.droppedFull.Inc()
	return w.kind.errFull
}

// writeClosed writes one record straight to the store, once, counting it
// dropped when that fails (set aside when the store refuses it).
func (w *writer[T]) writeClosed(ctx context.Context, rec T) error {
	w.kind.sanitize(&rec)
	if _, err := w.try(ctx, []T{rec}); err != nil {
		w.m.droppedClosed.Inc()
		return fmt.Errorf("writing %s after the %s closed: %w", w.kind.noun, w.kind.name, err)
	}
	return nil
}

// run writes queued records until close, then writes what is left and
// returns ctx.Err(). It returns errClosed at once if the writer runs
// already.
func (w *writer[T]) run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return w.kind.errClosed
	}
	w.loop(ctx)
	return ctx.Err()
}

// close stops queueing (later records are written directly) and waits
// until every queued record is written or ctx ends; then it gives up on
// the rest and counts them as dropped. It returns how many records the
// writer gave up on, and runs the writer itself when run was never called.
func (w *writer[T]) close(ctx context.Context) int64 {
	w.shut()
	if w.started.CompareAndSwap(false, true) {
		w.loop(ctx)
	} else {
		select {
		case <-w.done:
		case <-ctx.Done():
			w.abortOnce.Do(func() { close(w.abort) })
			<-w.done
		}
	}
	return w.lost.Load()
}

// shut marks the writer closed once no enqueue is in progress.
func (w *writer[T]) shut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.closing)
	}
}

// loop is the writer goroutine.
func (w *writer[T]) loop(ctx context.Context) {
	defer close(w.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.abort:
			cancel()
		case <-ctx.Done():
		}
	}()
	batch := make([]T, 0, w.cfg.MaxBatch)
	for more := true; more; {
		batch, more = w.next(ctx, batch[:0])
		if len(batch) > 0 {
			w.write(ctx, batch)
		}
	}
	w.shut() // when ctx ended first: later records go straight to the store
	n := len(w.queue)
	for range n {
		<-w.queue
	}
	w.giveUp(n, ctx.Err())
}

// next fills batch with the next records: it waits for a first one, then
// up to FlushInterval for more, but not at all once the writer is closing.
// It reports false when nothing more will come: the writer is closed and
// its queue empty, or ctx ended.
func (w *writer[T]) next(ctx context.Context, batch []T) ([]T, bool) {
	select {
	case r := <-w.queue:
		batch = append(batch, *r)
	case <-w.closing:
		batch = w.fill(batch)
		return batch, len(batch) > 0
	case <-ctx.Done():
		return batch, false
	}
	// The rest is taken in bulk, not a record at a time: a wait on the
	// queue would wake this goroutine for every request.
	if batch = w.fill(batch); len(batch) == cap(batch) {
		return batch, true
	}
	// A partial batch waits for FlushInterval, or until the records that
	// come meanwhile fill it: a full batch is written at once, also when
	// its first records came before the others.
	t := time.NewTimer(w.cfg.FlushInterval)
	defer t.Stop()
	for len(batch) < cap(batch) {
		select {
		case r := <-w.queue:
			batch = w.fill(append(batch, *r))
		case <-t.C:
			return w.fill(batch), true
		case <-w.closing:
			return w.fill(batch), true
		case <-ctx.Done():
			return batch, true // write gives it up and counts it
		}
	}
	return batch, true
}

// fill adds what is queued without waiting.
func (w *writer[T]) fill(batch []T) []T {
	for len(batch) < cap(batch) {
		select {
		case r := <-w.queue:
			batch = append(batch, *r)
		default:
			return batch
		}
	}
	return batch
}

// write writes a batch, retrying what is not yet stored with jittered
// exponential backoff until all is or ctx ends. Records the store refuses
// for their content are set aside on the way (try), so that they never
// hold back the records behind them.
func (w *writer[T]) write(ctx context.Context, batch []T) {
	for i := range batch {
		w.kind.sanitize(&batch[i])
	}
	w.m.batchSize.Observe(float64(len(batch)))
	size, wait := len(batch), w.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		n, err := w.try(ctx, batch)
		if batch = batch[n:]; err == nil {
			if attempt > 1 {
				w.log.Info(w.kind.noun+" batch written after retries", zap.Int("records", size), zap.Int("attempts", attempt))
			}
			return
		}
		w.m.writeErrors.Inc()
		if ctx.Err() != nil {
			w.giveUp(len(batch), err)
			return
		}
		w.log.Warn("writing "+w.kind.noun+" batch", zap.Int("records", len(batch)), zap.Int("attempt", attempt),
			zap.Duration("retry_in", wait), zap.Error(err))
		t := time.NewTimer(wait/2 + rand.N(wait/2+1)) // jitter keeps replicas from retrying in step
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			w.giveUp(len(batch), ctx.Err())
			return
		}
		wait = min(2*wait, w.cfg.MaxBackoff)
	}
}

// try writes batch once, setting aside the records the store refuses
// (ledger.ErrRefused), and returns how many of its first records are
// stored or set aside. Its error is the one that stopped it: the store
// failing, not refusing.
func (w *writer[T]) try(ctx context.Context, batch []T) (int, error) {
	n, err := w.attempt(ctx, batch)
	w.m.written.Add(float64(n))
	if err == nil || !errors.Is(err, ledger.ErrRefused) {
		return n, err
	}
	m, err := w.setAside(ctx, batch[n:], err)
	return n + m, err
}

// setAside writes a batch the store refused, in halves and halves of
// those, until each refused record is alone; that record is set aside:
// logged and counted as dropped (refused). A batch of n records with one
// refused costs about 2·log₂(n) more writes. It returns how many of
// batch's first records are stored or set aside, and the error of a write
// that failed otherwise.
func (w *writer[T]) setAside(ctx context.Context, batch []T, cause error) (int, error) {
	if len(batch) == 1 {
		w.m.droppedRefused.Inc()
		w.log.Error("record refused by the store, set aside", zap.String("writer", w.kind.name),
			zap.String("request_id", w.kind.requestID(&batch[0])), zap.Error(cause))
		return 1, nil
	}
	mid, done := len(batch)/2, 0
	for _, half := range [][]T{batch[:mid], batch[mid:]} {
		n, err := w.try(ctx, half)
		if done += n; err != nil {
			return done, err
		}
	}
	return done, nil
}

// attempt writes batch once, within WriteTimeout, and returns how many of
// its first records are stored.
func (w *writer[T]) attempt(ctx context.Context, batch []T) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	n, err := w.kind.write(ctx, batch)
	w.m.batchDuration.Observe(time.Since(start).Seconds())
	if err == nil {
		return len(batch), nil
	}
	return min(max(n, 0), len(batch)), err
}

func (w *writer[T]) giveUp(n int, cause error) {
	if n == 0 {
		return
	}
	w.lost.Add(int64(n))
	w.m.droppedAborted.Add(float64(n))
	w.log.Error(w.kind.noun+" records not written", zap.Int("records", n), zap.Error(cause))
}

// storable makes a free-form string storable (ledger.Storable): one such
// string (a client-sent request id, a binary body) would otherwise fail
// its write forever.
func storable(s *string) { *s = ledger.Storable(*s) }

// metrics are a writer's Prometheus metrics; labels are bounded (the drop
// reason).
type metrics struct {
	queued, written, writeErrors               prometheus.Counter
	droppedFull, droppedClosed, droppedAborted prometheus.Counter
	droppedRefused                             prometheus.Counter
	dropped                                    *prometheus.CounterVec
	queueLen                                   prometheus.GaugeFunc
	batchDuration, batchSize                   prometheus.Histogram
}

// newMetrics returns the metrics named prefix+"_…", whose help texts
// speak of records ("Usage records") and of the writer by name ("ledger").
func newMetrics(prefix, records, name string, queueLen func() float64) metrics {
	m := metrics{
		queued: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "_records_queued_total",
			Help: records + " accepted into the " + name + "'s queue."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "_records_written_total",
			Help: records + " written to the store."}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "_write_errors_total",
			Help: "Failed batch writes; each is retried."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_records_dropped_total",
			Help: records + " lost: the queue stayed full (full), a write after close failed (closed), shutdown gave up on them (aborted), or the store refused what they hold (refused; logged, the records behind them written). The goal is zero."},
			[]string{"reason"}),
		queueLen: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "_queue_records",
			Help: records + " waiting to be written."}, queueLen),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: prefix + "_batch_write_duration_seconds",
			Help:    "Time one batch write took, failed attempts included.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: prefix + "_batch_records",
			Help: "Records per batch.", Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}}),
	}
	m.droppedFull = m.dropped.WithLabelValues("full")
	m.droppedClosed = m.dropped.WithLabelValues("closed")
	m.droppedAborted = m.dropped.WithLabelValues("aborted")
	m.droppedRefused = m.dropped.WithLabelValues("refused")
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

// kindError is a kind's wording of a shared sentinel error, which
// errors.Is reports it as.
type kindError struct {
	msg string
	is  error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.is }
