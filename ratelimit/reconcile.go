package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrChargeKept wraps the error of a Charge that a Reconciler failed to
// make and keeps, to make it once its Spender answers again.
var ErrChargeKept = errors.New("charge kept, to be made again")

// ErrChargeLost wraps the error of a Charge that a Reconciler failed to
// make and could not keep: ReconcilerConfig.MaxPending counters have
// charges waiting already.
var ErrChargeLost = errors.New("charge lost")

// Defaults of ReconcilerConfig.
const (
	DefaultMaxPending       = 100_000
	DefaultReconcileTimeout = 5 * time.Second
)

// Backoff of Reconciler.Run between two rounds that failed.
const (
	minRetryBackoff = 50 * time.Millisecond
	maxRetryBackoff = 5 * time.Second
)

// ReconcilerConfig holds a Reconciler's knobs; the zero value works.
type ReconcilerConfig struct {
	// MaxPending bounds the counters whose charges wait to be made again;
	// a failed charge to another counter is lost (ErrChargeLost). Zero
	// means DefaultMaxPending, about 20 MB at most.
	MaxPending int
	// Timeout bounds each charge made again, on a context that no
	// caller's cancellation ends (several callers may wait for it); zero
	// means DefaultReconcileTimeout.
	Timeout time.Duration
	// Alerted receives the alerts that charges made again reached: their
	// Charge had returned an error, so no caller got them. Nil drops
	// them.
	Alerted func([]Alert)
	// Now tells when the kept charges of a period long over (its counter
	// gone: SpendGrace after its end) can be dropped; nil means time.Now.
	Now func() time.Time
}

// Reconciler is a Spender over another that keeps the charges the other
// failed to make (its store, say Redis, failed or timed out) and makes
// them once it answers again: before the next Reserve or Spent that
// touches their counters, and in Run as soon as a call succeeds, or on a
// backoff of up to 5 s. Charges only add to counters, so making a failed
// one later counts exactly what it would have counted, whatever ran in
// between, on this replica or on others sharing the store: the counter
// misses it only while it waits.
//
// What it cannot do:
//   - A charge whose reply was lost (a timeout after the store made it)
//     is made again: the counter then holds it twice, refusing its
//     subject early, never late.
//   - Kept charges live in the process: a process that stops before the
//     store answers loses them (Pending says how many counters).
//   - Beyond MaxPending counters, a failed charge is lost (Lost).
//
// A Reserve whose touched counters have charges waiting makes them first
// (concurrent callers wait for one attempt, never make a charge twice);
// if that fails, the Reserve fails and reserves nothing. Over a Seeded
// Spender, a charge kept for a counter the store lost meanwhile is left
// to the rebuild from the ledger, which holds it, as Seeded's Charge does.
type Reconciler struct {
	s       Spender
	cfg     ReconcilerConfig
	mu      sync.Mutex
	pending map[string]*keptCharge // by Budget.Counter
	n       atomic.Int64           // len(pending), read without mu
	lost    atomic.Uint64
	// kept wakes Run when a charge is kept; answered when a call to the
	// Spender succeeded while charges wait.
	kept, answered chan struct{}
}

// keptCharge is what waits for one counter: the sum of the charges that
// failed.
type keptCharge struct {
	budget Budget    // the latest given: its Max and Alerts
	at     time.Time // in the counter's period
	amount int64
	flight *flight // the attempt under way, nil if none
}

// flight is an attempt at making a kept charge, which concurrent callers
// wait for rather than make the charge again.
type flight struct {
	done chan struct{}
	err  error
}

// NewReconciler returns a Reconciler over s.
func NewReconciler(s Spender, cfg ReconcilerConfig) (*Reconciler, error) {
	switch {
	case s == nil:
		return nil, errors.New("reconciler: nil Spender")
	case cfg.MaxPending < 0:
		return nil, fmt.Errorf("reconciler: negative MaxPending %d", cfg.MaxPending)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("reconciler: negative timeout %v", cfg.Timeout)
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultReconcileTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Reconciler{s: s, cfg: cfg, pending: map[string]*keptCharge{},
		kept: make(chan struct{}, 1), answered: make(chan struct{}, 1)}, nil
}

// Reserve implements Spender: it makes the charges waiting for the
// budgets' counters, then reserves. An error making them fails the
// Reserve, which reserves nothing.
func (r *Reconciler) Reserve(ctx context.Context, budgets []Budget, at time.Time, amount int64) (SpendDecision, error) {
	if err := r.settle(ctx, budgets, at); err != nil {
		return SpendDecision{}, err
	}
	d, err := r.s.Reserve(ctx, budgets, at, amount)
	r.answer(err)
	return d, err
}

// Charge implements Spender. A charge the Spender fails to make is kept,
// to be made once it answers again, and the error wraps ErrChargeKept; or,
// beyond MaxPending, ErrChargeLost for the budgets it could not keep. A
// charge that fails with ErrInvalid, or after ctx ended, is not kept:
// that error means nothing was done, as from any Spender.
func (r *Reconciler) Charge(ctx context.Context, budgets []Budget, at time.Time, amount int64) ([]Alert, error) {
	if err := ValidateSpend(budgets, amount); err != nil {
		return nil, err
	}
	alerts, err := r.s.Charge(ctx, budgets, at, amount)
	r.answer(err)
	// A caller that gave up (its context ended) keeps nothing, as from any
	// Spender; nor does a charge that changes nothing.
	if err == nil || ctx.Err() != nil || amount == 0 || len(budgets) == 0 {
		return alerts, err
	}
	if lost := r.keep(budgets, at, amount); lost > 0 {
		r.lost.Add(uint64(lost))
		return nil, fmt.Errorf("%w for %d of %d budgets: %w", ErrChargeLost, lost, len(budgets), err)
	}
	return nil, fmt.Errorf("%w: %w", ErrChargeKept, err)
}

// Spent implements Spender: it makes the charges waiting for the budgets'
// counters first.
func (r *Reconciler) Spent(ctx context.Context, budgets []Budget, at time.Time) ([]int64, error) {
	if err := r.settle(ctx, budgets, at); err != nil {
		return nil, err
	}
	n, err := r.s.Spent(ctx, budgets, at)
	r.answer(err)
	return n, err
}

// Pending returns the number of counters with charges waiting.
func (r *Reconciler) Pending() int { return int(r.n.Load()) }

// Lost returns the number of counters' charges lost beyond MaxPending
// since the Reconciler was made.
func (r *Reconciler) Lost() uint64 { return r.lost.Load() }

// Retry makes every waiting charge once, dropping those of periods long
// over. It stops at the first error, the store's: trying the others
// would fail as surely, each after its timeout.
func (r *Reconciler) Retry(ctx context.Context) error {
	if r.n.Load() == 0 {
		return nil
	}
	r.mu.Lock()
	r.expire()
	keys := make([]string, 0, len(r.pending))
	for k := range r.pending {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	for _, k := range keys {
		if err := r.make(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Run makes the waiting charges until ctx ends: as soon as one is kept,
// again after a backoff of 50 ms doubling to 5 s while they fail, and at
// once when a call to the Spender succeeds. It returns ctx's error; the
// charges still waiting then are the caller's to try once more (Retry)
// or report (Pending).
func (r *Reconciler) Run(ctx context.Context) error {
	var backoff time.Duration
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		switch {
		case r.n.Load() == 0:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-r.kept:
			}
		case backoff > 0:
			timer.Reset(backoff)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-r.answered:
				timer.Stop()
			case <-timer.C:
			}
		}
		if err := r.Retry(ctx); err != nil {
			backoff = min(max(2*backoff, minRetryBackoff), maxRetryBackoff)
		} else {
			backoff = 0
		}
	}
}

// settle makes the charges waiting for the budgets' counters at at.
func (r *Reconciler) settle(ctx context.Context, budgets []Budget, at time.Time) error {
	if r.n.Load() == 0 {
		return nil
	}
	for _, b := range budgets {
		if err := r.make(ctx, b.Counter(at)); err != nil {
			return fmt.Errorf("making the charges kept for budget %s: %w", b.Key, err)
		}
	}
	return nil
}

// make makes the charge waiting for the counter key, or waits for the
// attempt under way. Charges kept meanwhile wait for the next.
func (r *Reconciler) make(ctx context.Context, key string) error {
	r.mu.Lock()
	p, ok := r.pending[key]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	if f := p.flight; f != nil {
		r.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	p.flight = f
	b, at, amount := p.budget, p.at, p.amount
	r.mu.Unlock()

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	alerts, err := r.s.Charge(cctx, []Budget{b}, at, amount)
	cancel()

	r.mu.Lock()
	p.flight = nil
	switch {
	case err == nil:
		p.amount -= amount
		if p.amount == 0 {
			r.drop(key)
		}
	case errors.Is(err, ErrInvalid): // never made: lost
		r.drop(key)
		r.lost.Add(1)
	}
	f.err = err
	close(f.done)
	r.mu.Unlock()
	if len(alerts) > 0 && r.cfg.Alerted != nil {
		r.cfg.Alerted(alerts)
	}
	return err
}

// keep adds amount to what waits for each budget's counter at at, and
// returns how many it could not keep.
func (r *Reconciler) keep(budgets []Budget, at time.Time, amount int64) (lost int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range budgets {
		key := b.Counter(at)
		p, ok := r.pending[key]
		if !ok {
			if len(r.pending) >= r.cfg.MaxPending {
				r.expire()
			}
			if len(r.pending) >= r.cfg.MaxPending {
				lost++
				continue
			}
			p = &keptCharge{at: at}
			r.pending[key] = p
			r.n.Add(1)
		}
		p.budget = b
		p.amount = min(max(p.amount+amount, -MaxSpend), MaxSpend)
	}
	signal(r.kept)
	return lost
}

// expire drops the charges of periods whose counters are gone: over
// SpendGrace ago. The caller holds mu.
func (r *Reconciler) expire() {
	now := r.cfg.Now()
	for k, p := range r.pending {
		if _, end := p.budget.Period(p.at); p.flight == nil && now.Sub(end) > SpendGrace {
			r.drop(k)
		}
	}
}

// drop forgets the counter key. The caller holds mu.
func (r *Reconciler) drop(key string) {
	delete(r.pending, key)
	r.n.Add(-1)
}

// answer tells Run the Spender answered, when it did and charges wait.
func (r *Reconciler) answer(err error) {
	if err == nil && r.n.Load() > 0 {
		signal(r.answered)
	}
}

// signal wakes whoever waits on c, once however many signal.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

var _ Spender = (*Reconciler)(nil)
