package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/sqlite"
)

// Retention deletes the usage records older than the days kept, counts
// them, and keeps the rest; it stops when told to.
func TestUsageRetention(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a, _ := store.CreateAccount(ctx, "acme")
	_, k, _ := authz.CreateKey(ctx, store, a.ID, "", nil)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for i, age := range []time.Duration{400 * 24 * time.Hour, 31 * 24 * time.Hour, 29 * 24 * time.Hour, time.Hour} {
		if err := store.AppendUsage(ctx, ledger.UsageRecord{RequestID: "r", KeyID: k.ID, AccountID: a.ID, Model: "m",
			Status: 200, TotalTokens: int64(i + 1), At: now.Add(-age)}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	r := newRetention(store, 30, 0, reg, zap.NewNop())
	r.now = func() time.Time { return now }
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() { r.run(quit); close(done) }()
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(r.deleted) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first sweep did not delete the two old records")
		}
	}
	close(quit)
	<-done
	u, _ := store.UsageSince(ctx, a.ID, time.Time{})
	if u.Requests != 2 || u.TotalTokens != 3+4 || testutil.ToFloat64(r.deleted) != 2 {
		t.Errorf("after retention: %+v, %v deleted; want the two of the last 30 days kept", u, testutil.ToFloat64(r.deleted))
	}
}
