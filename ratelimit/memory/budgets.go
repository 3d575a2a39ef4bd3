package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"modelgate/ratelimit"
)

// Spender is an in-process ratelimit.Spender. One mutex guards the
// counters, so that a reservation over several budgets is atomic.
type Spender struct {
	mu       sync.Mutex
	counters map[string]*spent
	ops      int // since the last sweep
}

// spent is one budget period's counter.
type spent struct {
	amount  int64
	end     time.Time
	alerted [len(ratelimit.AlertPercents)]bool
}

// NewSpender returns a Spender with no spending.
func NewSpender() *Spender { return &Spender{counters: map[string]*spent{}} }

// Reserve implements ratelimit.Spender.
func (s *Spender) Reserve(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, error) {
	d, _, err := s.reserve(ctx, budgets, at, amount, false)
	return d, err
}

// ReserveIfPresent implements ratelimit.Seedable.
func (s *Spender) ReserveIfPresent(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, []int, error) {
	return s.reserve(ctx, budgets, at, amount, true)
}

// reserve is Reserve; ifPresent changes nothing when a counter is absent
// and returns the indexes of the absent ones.
func (s *Spender) reserve(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64, ifPresent bool) (ratelimit.SpendDecision, []int, error) {
	if err := check(ctx, ratelimit.ValidateReserve(budgets, amount)); err != nil {
		return ratelimit.SpendDecision{}, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(at)
	if ifPresent {
		var missing []int
		for i, b := range budgets {
			if _, ok := s.counters[b.Counter(at)]; !ok {
				missing = append(missing, i)
			}
		}
		if missing != nil {
			return ratelimit.SpendDecision{}, missing, nil
		}
	}
	d := ratelimit.SpendDecision{Allowed: true, Statuses: make([]ratelimit.BudgetStatus, len(budgets))}
	cs := make([]*spent, len(budgets))
	for i, b := range budgets {
		cs[i] = s.counter(b, at)
		st := &d.Statuses[i]
		st.Budget, st.Spent, st.Renews = b, cs[i].amount, cs[i].end
		st.Allowed = cs[i].amount < b.Max
		d.Allowed = d.Allowed && st.Allowed
	}
	if d.Allowed {
		for i, c := range cs {
			c.amount = min(c.amount+amount, ratelimit.MaxSpend)
			d.Statuses[i].Spent = c.amount
		}
	}
	return d, nil, nil
}

// Charge implements ratelimit.Spender.
func (s *Spender) Charge(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	return s.charge(ctx, budgets, at, amount, false)
}

// ChargeIfPresent implements ratelimit.Seedable.
func (s *Spender) ChargeIfPresent(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	return s.charge(ctx, budgets, at, amount, true)
}

// charge is Charge; ifPresent skips absent counters.
func (s *Spender) charge(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64, ifPresent bool) ([]ratelimit.Alert, error) {
	if err := check(ctx, ratelimit.ValidateSpend(budgets, amount)); err != nil {
		return nil, err
	}
	var alerts []ratelimit.Alert
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(at)
	for _, b := range budgets {
		if _, ok := s.counters[b.Counter(at)]; ifPresent && !ok {
			continue
		}
		c := s.counter(b, at)
		c.amount = min(max(c.amount+amount, 0), ratelimit.MaxSpend)
		if !b.Alerts || b.Max == 0 {
			continue
		}
		for i, p := range ratelimit.AlertPercents {
			if !c.alerted[i] && c.amount >= ratelimit.Threshold(b.Max, p) {
				c.alerted[i] = true
				alerts = append(alerts, ratelimit.Alert{Budget: b, Percent: p, Spent: c.amount, Renews: c.end})
			}
		}
	}
	return alerts, nil
}

// Seed implements ratelimit.Seedable.
func (s *Spender) Seed(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amounts []int64) error {
	if err := check(ctx, ratelimit.ValidateBudgets(budgets)); err != nil {
		return err
	}
	if len(amounts) != len(budgets) {
		return fmt.Errorf("%w: %d amounts for %d budgets", ratelimit.ErrInvalid, len(amounts), len(budgets))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range budgets {
		if _, ok := s.counters[b.Counter(at)]; ok {
			continue
		}
		c := s.counter(b, at)
		c.amount = min(max(amounts[i], 0), ratelimit.MaxSpend)
		if b.Alerts && b.Max > 0 {
			for j, p := range ratelimit.AlertPercents {
				c.alerted[j] = c.amount >= ratelimit.Threshold(b.Max, p)
			}
		}
	}
	return nil
}

// Spent implements ratelimit.Spender.
func (s *Spender) Spent(ctx context.Context, budgets []ratelimit.Budget, at time.Time) ([]int64, error) {
	if err := check(ctx, ratelimit.ValidateBudgets(budgets)); err != nil {
		return nil, err
	}
	out := make([]int64, len(budgets))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range budgets {
		if c, ok := s.counters[b.Counter(at)]; ok {
			out[i] = c.amount
		}
	}
	return out, nil
}

// check returns ctx's error, else invalid.
func check(ctx context.Context, invalid error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return invalid
}

// counter returns the counter of b's period holding at, made if missing.
func (s *Spender) counter(b ratelimit.Budget, at time.Time) *spent {
	key := b.Counter(at)
	c, ok := s.counters[key]
	if !ok {
		_, end := b.Period(at)
		c = &spent{end: end}
		s.counters[key] = c
	}
	return c
}

// sweep drops, every sweepMin operations, the counters of periods that
// ended more than ratelimit.SpendGrace before at.
func (s *Spender) sweep(at time.Time) {
	if s.ops++; s.ops < sweepMin {
		return
	}
	s.ops = 0
	for k, c := range s.counters {
		if at.Sub(c.end) > ratelimit.SpendGrace {
			delete(s.counters, k)
		}
	}
}

var _ ratelimit.Seedable = (*Spender)(nil)
