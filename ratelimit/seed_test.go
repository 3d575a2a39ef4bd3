package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
)

// LedgerSeed asks the ledger for the budget's subject from the period's
// start, under a deadline of its own, and clamps what it answers to what a
// counter holds.
func TestLedgerSeed(t *testing.T) {
	t.Parallel()
	b := ratelimit.Budget{Key: "account:a", Max: 100, Renewal: ratelimit.Monthly}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	errDown := errors.New("ledger down")
	for _, tt := range []struct {
		name    string
		ledger  int64
		err     error
		want    int64
		wantErr error
	}{
		{"spent", 42, nil, 42, nil},
		{"refunded below zero", -5, nil, 0, nil},
		{"over the most a counter holds", ratelimit.MaxSpend + 1, nil, ratelimit.MaxSpend, nil},
		{"ledger fails", 0, errDown, 0, errDown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var asked string
			var since time.Time
			var deadline bool
			seed := ratelimit.LedgerSeed(func(ctx context.Context, subject string, s time.Time) (int64, error) {
				asked, since = subject, s
				_, deadline = ctx.Deadline()
				return tt.ledger, tt.err
			})
			got, err := seed(context.Background(), b, start)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("seed = %d, %v; want %d, %v", got, err, tt.want, tt.wantErr)
			}
			if asked != b.Key || !since.Equal(start) || !deadline {
				t.Errorf("asked the ledger for %q since %v (deadline %v); want %q since %v with a deadline", asked, since, deadline, b.Key, start)
			}
		})
	}
}

// notSeedable is a Spender that cannot tell a counter missing.
type notSeedable struct{ ratelimit.Spender }

// LedgerSpender rebuilds a Seedable's missing counters from the ledger,
// and leaves a Spender alone when it is not Seedable or there is no
// ledger.
func TestLedgerSpender(t *testing.T) {
	t.Parallel()
	spent := func(context.Context, string, time.Time) (int64, error) { return 70, nil }
	ns := notSeedable{memory.NewSpender()}
	if got := ratelimit.LedgerSpender(ns, spent); got != ratelimit.Spender(ns) {
		t.Errorf("LedgerSpender(not Seedable) = %T, want it unchanged", got)
	}
	mem := memory.NewSpender()
	if got := ratelimit.LedgerSpender(mem, nil); got != ratelimit.Spender(mem) {
		t.Errorf("LedgerSpender(without a ledger) = %T, want it unchanged", got)
	}
	b := ratelimit.Budget{Key: "key:k", Max: 100, Renewal: ratelimit.Daily}
	at := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	got, err := ratelimit.LedgerSpender(memory.NewSpender(), spent).Spent(context.Background(), []ratelimit.Budget{b}, at)
	if err != nil || len(got) != 1 || got[0] != 70 {
		t.Errorf("Spent of a lost counter = %v, %v; want [70] from the ledger", got, err)
	}
}
