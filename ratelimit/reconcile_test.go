package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
	"modelgate/ratelimit/memory"
)

// failingSeedable is a Seedable whose calls fail while fail is set, and
// whose store restart loses: a Redis that goes down and comes back empty.
type failingSeedable struct {
	mu   sync.Mutex
	s    *memory.Spender
	fail atomic.Bool
}

func (f *failingSeedable) store() (*memory.Spender, error) {
	if f.fail.Load() {
		return nil, limitertest.ErrDown
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s, nil
}

func (f *failingSeedable) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s = memory.NewSpender()
}

func (f *failingSeedable) Reserve(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, error) {
	s, err := f.store()
	if err != nil {
		return ratelimit.SpendDecision{}, err
	}
	return s.Reserve(ctx, bs, at, amount)
}

func (f *failingSeedable) ReserveIfPresent(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, []int, error) {
	s, err := f.store()
	if err != nil {
		return ratelimit.SpendDecision{}, nil, err
	}
	return s.ReserveIfPresent(ctx, bs, at, amount)
}

func (f *failingSeedable) Charge(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	s, err := f.store()
	if err != nil {
		return nil, err
	}
	return s.Charge(ctx, bs, at, amount)
}

func (f *failingSeedable) ChargeIfPresent(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	s, err := f.store()
	if err != nil {
		return nil, err
	}
	return s.ChargeIfPresent(ctx, bs, at, amount)
}

func (f *failingSeedable) Seed(ctx context.Context, bs []ratelimit.Budget, at time.Time, amounts []int64) error {
	s, err := f.store()
	if err != nil {
		return err
	}
	return s.Seed(ctx, bs, at, amounts)
}

func (f *failingSeedable) Spent(ctx context.Context, bs []ratelimit.Budget, at time.Time) ([]int64, error) {
	s, err := f.store()
	if err != nil {
		return nil, err
	}
	return s.Spent(ctx, bs, at)
}

// A charge kept while the store was down, which came back empty, is left
// to the rebuild from the ledger, which holds it: counted once.
func TestReconcilerOverSeededCountsOnce(t *testing.T) {
	at := time.Date(2030, 11, 15, 12, 30, 0, 0, time.UTC)
	b := ratelimit.Budget{Key: "account:a", Max: 100, Renewal: ratelimit.Monthly}
	var ledger atomic.Int64 // what the ledger charged account:a this month
	seed := func(context.Context, ratelimit.Budget, time.Time) (int64, error) { return ledger.Load(), nil }
	f := &failingSeedable{s: memory.NewSpender()}
	r, err := ratelimit.NewReconciler(ratelimit.Seeded(f, seed), ratelimit.ReconcilerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := r.Reserve(ctx, []ratelimit.Budget{b}, at, 40); err != nil || !d.Allowed {
		t.Fatalf("Reserve = %+v, %v", d, err)
	}
	f.fail.Store(true)
	if _, err := r.Charge(ctx, []ratelimit.Budget{b}, at, 30); err == nil {
		t.Fatal("Charge succeeded while the store fails")
	}
	ledger.Store(70) // the exchange cost 70, as the ledger now says
	f.restart()      // the store comes back empty
	f.fail.Store(false)
	d, err := r.Reserve(ctx, []ratelimit.Budget{b}, at, 10)
	if err != nil || !d.Allowed || d.Statuses[0].Spent != 80 {
		t.Fatalf("Reserve = %+v, %v; want allowed at 80 (70 from the ledger, counted once)", d, err)
	}
	if r.Pending() != 0 {
		t.Errorf("Pending() = %d, want 0", r.Pending())
	}
}

func TestNewReconciler(t *testing.T) {
	for name, cfg := range map[string]ratelimit.ReconcilerConfig{
		"negative MaxPending": {MaxPending: -1},
		"negative timeout":    {Timeout: -time.Second},
	} {
		if _, err := ratelimit.NewReconciler(memory.NewSpender(), cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ratelimit.NewReconciler(nil, ratelimit.ReconcilerConfig{}); err == nil {
		t.Error("nil Spender: no error")
	}
}
