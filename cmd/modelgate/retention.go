package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"modelgate/authz"
)

// Retention: with storage.usage_retention_days, the gateway deletes older
// usage records, and with captures in the store, those older than
// observability.capture.retention_days, at start and every
// retentionInterval, in batches of retentionBatch so the database is never
// held long. Replicas sharing a database may all run it: each deletes what
// is left.
const (
	retentionInterval = time.Hour
	retentionBatch    = 10_000
	// retentionTimeout bounds each batch.
	retentionTimeout = 30 * time.Second
)

// retention deletes the usage records older than keep, and the captures
// older than keepCaptures; zero keeps them.
type retention struct {
	store              authz.Store
	keep, keepCaptures time.Duration
	now                func() time.Time
	log                *zap.Logger
	deleted, captures  prometheus.Counter
}

func newRetention(store authz.Store, days, captureDays int, reg prometheus.Registerer, log *zap.Logger) *retention {
	r := &retention{store: store, keep: time.Duration(days) * 24 * time.Hour, keepCaptures: time.Duration(captureDays) * 24 * time.Hour,
		now: time.Now, log: log,
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgate_ledger_records_expired_total",
			Help: "Usage records deleted for being older than storage.usage_retention_days."}),
		captures: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgate_captures_expired_total",
			Help: "Payload captures deleted for being older than observability.capture.retention_days."})}
	reg.MustRegister(r.deleted, r.captures)
	return r
}

// run deletes what is due now, then every retentionInterval until quit
// closes.
func (r *retention) run(quit <-chan struct{}) {
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	for {
		r.sweep(quit)
		select {
		case <-quit:
			return
		case <-t.C:
		}
	}
}

// sweep deletes what is due, a batch at a time, until none is left or
// quit closes.
func (r *retention) sweep(quit <-chan struct{}) {
	if r.keep > 0 {
		r.expire(quit, "usage records", r.now().Add(-r.keep), r.store.DeleteUsageBefore, r.deleted)
	}
	if r.keepCaptures > 0 {
		r.expire(quit, "captures", r.now().Add(-r.keepCaptures), r.store.DeleteCapturesBefore, r.captures)
	}
}

func (r *retention) expire(quit <-chan struct{}, what string, before time.Time,
	del func(context.Context, time.Time, int) (int64, error), counted prometheus.Counter) {
	var total int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), retentionTimeout)
		n, err := del(ctx, before, retentionBatch)
		cancel()
		total += n
		counted.Add(float64(n))
		if err != nil {
			r.log.Error("deleting expired "+what, zap.Error(err))
			break
		}
		select {
		case <-quit:
			return
		default:
		}
		if n < retentionBatch {
			break
		}
	}
	if total > 0 {
		r.log.Info("expired "+what+" deleted", zap.Int64("deleted", total), zap.Time("before", before))
	}
}
