package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"modelgate/authz"
)

// Usage retention: with storage.usage_retention_days, the gateway deletes
// older usage records at start and every retentionInterval, in batches of
// retentionBatch so the database is never held long. Replicas sharing a
// database may all run it: each deletes what is left.
const (
	retentionInterval = time.Hour
	retentionBatch    = 10_000
	// retentionTimeout bounds each batch.
	retentionTimeout = 30 * time.Second
)

// retention deletes the usage records older than keep.
type retention struct {
	store   authz.Store
	keep    time.Duration
	now     func() time.Time
	log     *zap.Logger
	deleted prometheus.Counter
}

func newRetention(store authz.Store, days int, reg prometheus.Registerer, log *zap.Logger) *retention {
	r := &retention{store: store, keep: time.Duration(days) * 24 * time.Hour, now: time.Now, log: log,
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgate_ledger_records_expired_total",
			Help: "Usage records deleted for being older than storage.usage_retention_days."})}
	reg.MustRegister(r.deleted)
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

// sweep deletes the records older than keep, a batch at a time, until
// none is left or quit closes.
func (r *retention) sweep(quit <-chan struct{}) {
	before := r.now().Add(-r.keep)
	var total int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), retentionTimeout)
		n, err := r.store.DeleteUsageBefore(ctx, before, retentionBatch)
		cancel()
		total += n
		r.deleted.Add(float64(n))
		if err != nil {
			r.log.Error("deleting expired usage records", zap.Error(err))
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
		r.log.Info("expired usage records deleted", zap.Int64("records", total), zap.Time("before", before))
	}
}
