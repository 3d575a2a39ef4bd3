package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Seed returns what a budget's subject (Budget.Key: "key:<id>",
// "account:<id>", "group:<id>") has spent since start, the start of the
// period in question, in billionths of the currency unit: what the usage
// ledger charged it. Seeded rebuilds a missing counter from it.
type Seed func(ctx context.Context, b Budget, start time.Time) (int64, error)

// Seedable is a Spender that tells an absent counter from an empty one and
// sets absent counters, so that Seeded can rebuild counters lost with a
// process's memory or a Redis that restarted empty. The memory and Redis
// Spenders are Seedable; the suite in ratelimit/limitertest (RunSeeding)
// checks them.
type Seedable interface {
	Spender
	// ReserveIfPresent is Reserve when the counters of every budget for
	// the period holding at exist. Otherwise it changes nothing and
	// returns the indexes of the budgets whose counters are absent, with
	// a zero decision.
	ReserveIfPresent(ctx context.Context, budgets []Budget, at time.Time, amount int64) (d SpendDecision, missing []int, err error)
	// ChargeIfPresent is Charge on the budgets whose counters exist; the
	// others are left absent, for Seed to rebuild from the ledger, which
	// holds what is charged here too.
	ChargeIfPresent(ctx context.Context, budgets []Budget, at time.Time, amount int64) ([]Alert, error)
	// Seed sets the counter of each budget for the period holding at to
	// amounts[i] (clamped to [0, MaxSpend]) if it is absent, marking the
	// alerts it already reached as given; a counter that exists is left
	// alone (SETNX), so that replicas seeding at once count once.
	Seed(ctx context.Context, budgets []Budget, at time.Time, amounts []int64) error
}

// seedTries bounds how many times Seeded seeds the counters of one Reserve
// before it reserves on whatever it finds: counters keep vanishing only if
// the store is flushed in a loop.
const seedTries = 3

// Seeded returns a Spender over s that rebuilds a missing counter (a new
// process, a Redis restarted or flushed, a new period) from seed before the
// first Reserve that needs it. A counter that exists costs nothing more
// than s's Reserve: seed runs only when s finds a counter absent. Charge
// leaves absent counters absent (the next Reserve rebuilds them from the
// ledger, which holds that charge too); Spent rebuilds them first.
//
// What the rebuilt counter cannot know is the reservations of requests
// in flight when the counters were lost and not yet in the ledger when it
// was read: those requests' cost (at most their number times a request's
// cost, as the ledger records each within a second or so of its end) may
// be spent once more in that period.
//
// An error from seed fails the Reserve (or Spent): nothing is reserved.
func Seeded(s Seedable, seed Seed) Spender { return &seeded{s: s, seed: seed} }

type seeded struct {
	s    Seedable
	seed Seed
}

func (p *seeded) Reserve(ctx context.Context, budgets []Budget, at time.Time, amount int64) (SpendDecision, error) {
	for range seedTries {
		d, missing, err := p.s.ReserveIfPresent(ctx, budgets, at, amount)
		if err != nil || len(missing) == 0 {
			return d, err
		}
		if err := p.rebuild(ctx, budgets, at, missing); err != nil {
			return SpendDecision{}, err
		}
	}
	return p.s.Reserve(ctx, budgets, at, amount)
}

func (p *seeded) Charge(ctx context.Context, budgets []Budget, at time.Time, amount int64) ([]Alert, error) {
	return p.s.ChargeIfPresent(ctx, budgets, at, amount)
}

func (p *seeded) Spent(ctx context.Context, budgets []Budget, at time.Time) ([]int64, error) {
	// A reservation of nothing changes no counter and tells the absent.
	_, missing, err := p.s.ReserveIfPresent(ctx, budgets, at, 0)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		if err := p.rebuild(ctx, budgets, at, missing); err != nil {
			return nil, err
		}
	}
	return p.s.Spent(ctx, budgets, at)
}

// rebuild seeds the counters of budgets[missing] from the ledger.
func (p *seeded) rebuild(ctx context.Context, budgets []Budget, at time.Time, missing []int) error {
	bs := make([]Budget, len(missing))
	amounts := make([]int64, len(missing))
	for i, j := range missing {
		bs[i] = budgets[j]
		start, _ := bs[i].Period(at)
		n, err := p.seed(ctx, bs[i], start)
		if err != nil {
			return fmt.Errorf("rebuilding budget %s from the ledger: %w", bs[i].Key, err)
		}
		amounts[i] = n
	}
	return p.s.Seed(ctx, bs, at, amounts)
}

// SpentSince is the usage ledger's answer to "what has this subject
// ("key:<id>", "account:<id>", "group:<id>") been charged since since", in
// billionths of the currency unit: authz.Ledger's SpentSince, its
// pricing.Nanos taken as int64 (ratelimit does not import authz).
type SpentSince func(ctx context.Context, subject string, since time.Time) (int64, error)

// ledgerSeedTimeout bounds the ledger query that rebuilds a budget's
// counter.
const ledgerSeedTimeout = 5 * time.Second

// LedgerSeed rebuilds a budget's counter from the ledger: what its subject
// was charged from the period's start, clamped to [0, MaxSpend], each
// query bounded by its own timeout.
func LedgerSeed(spent SpentSince) Seed {
	return func(ctx context.Context, b Budget, start time.Time) (int64, error) {
		ctx, cancel := context.WithTimeout(ctx, ledgerSeedTimeout)
		defer cancel()
		n, err := spent(ctx, b.Key, start)
		return min(max(n, 0), MaxSpend), err
	}
}

// LedgerSpender is sp rebuilding a missing counter (a new process, a Redis
// that came back empty, a new period) from the ledger before the first
// reservation that needs it, when sp can tell a counter missing (it is
// Seedable) and spent is not nil; otherwise sp.
func LedgerSpender(sp Spender, spent SpentSince) Spender {
	if s, ok := sp.(Seedable); ok && spent != nil {
		return Seeded(s, LedgerSeed(spent))
	}
	return sp
}
