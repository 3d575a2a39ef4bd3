package redis

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/ratelimit"
)

var (
	//go:embed reserve.lua
	reserveLua string
	//go:embed spend.lua
	spendLua string
	//go:embed spent.lua
	spentLua string
	//go:embed seed.lua
	seedLua string
)

// Spender is a ratelimit.Spender whose counters live in Redis, shared by
// every replica. It does not own the client. Its keys are the Config's
// Prefix followed by Budget.Counter; Config.Now is not used (callers pass
// the time).
type Spender struct {
	client  goredis.Scripter
	prefix  string
	timeout time.Duration
	reserve *goredis.Script
	spend   *goredis.Script
	spent   *goredis.Script
	seed    *goredis.Script
}

// NewSpender returns a Spender on client, which must honor context
// deadlines as New's does.
func NewSpender(client goredis.Scripter, cfg Config) (*Spender, error) {
	if client == nil {
		return nil, errors.New("redis budgets: nil client")
	}
	if !honorsDeadlines(client) {
		return nil, errors.New("redis budgets: the client must set ContextTimeoutEnabled so each call is bounded by its timeout")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("redis budgets: negative timeout %v", cfg.Timeout)
	}
	return &Spender{
		client:  client,
		prefix:  cmp.Or(cfg.Prefix, DefaultPrefix),
		timeout: cmp.Or(cfg.Timeout, DefaultTimeout),
		reserve: goredis.NewScript(reserveLua),
		spend:   goredis.NewScript(spendLua),
		spent:   goredis.NewScript(spentLua),
		seed:    goredis.NewScript(seedLua),
	}, nil
}

// Reserve implements ratelimit.Spender in one script call.
func (s *Spender) Reserve(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, error) {
	d, _, err := s.reserveIf(ctx, budgets, at, amount, false)
	return d, err
}

// ReserveIfPresent implements ratelimit.Seedable in one script call.
func (s *Spender) ReserveIfPresent(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, []int, error) {
	return s.reserveIf(ctx, budgets, at, amount, true)
}

func (s *Spender) reserveIf(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64, ifPresent bool) (ratelimit.SpendDecision, []int, error) {
	if err := check(ctx, ratelimit.ValidateReserve(budgets, amount)); err != nil {
		return ratelimit.SpendDecision{}, nil, err
	}
	if len(budgets) == 0 {
		return ratelimit.SpendDecision{Allowed: true, Statuses: []ratelimit.BudgetStatus{}}, nil, nil
	}
	keys, ends := s.keys(budgets, at)
	args := make([]any, 2, 2+2*len(budgets))
	args[0], args[1] = amount, flag(ifPresent)
	for i, b := range budgets {
		args = append(args, b.Max, expiry(ends[i]))
	}
	vals, err := s.run(ctx, s.reserve, keys, args, 1+len(budgets))
	if err != nil {
		return ratelimit.SpendDecision{}, nil, fmt.Errorf("reserving in redis: %w", err)
	}
	if vals[0] == -1 {
		var missing []int
		for i, v := range vals[1:] {
			if v == -1 {
				missing = append(missing, i)
			}
		}
		return ratelimit.SpendDecision{}, missing, nil
	}
	d := ratelimit.SpendDecision{Allowed: vals[0] == 1, Statuses: make([]ratelimit.BudgetStatus, len(budgets))}
	for i, b := range budgets {
		spent := vals[1+i]
		// A refused decision reads the counters before any reservation.
		d.Statuses[i] = ratelimit.BudgetStatus{Budget: b, Spent: spent, Renews: ends[i],
			Allowed: spent-reserved(d.Allowed, amount) < b.Max}
	}
	return d, nil, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func reserved(allowed bool, amount int64) int64 {
	if allowed {
		return amount
	}
	return 0
}

// Charge implements ratelimit.Spender in one script call.
func (s *Spender) Charge(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	return s.charge(ctx, budgets, at, amount, false)
}

// ChargeIfPresent implements ratelimit.Seedable in one script call.
func (s *Spender) ChargeIfPresent(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	return s.charge(ctx, budgets, at, amount, true)
}

func (s *Spender) charge(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amount int64, ifPresent bool) ([]ratelimit.Alert, error) {
	if err := check(ctx, ratelimit.ValidateSpend(budgets, amount)); err != nil || len(budgets) == 0 {
		return nil, err
	}
	keys, ends := s.keys(budgets, at)
	args := make([]any, 2, 2+3*len(budgets))
	args[0], args[1] = amount, flag(ifPresent)
	for i, b := range budgets {
		var t [len(ratelimit.AlertPercents)]int64
		if b.Alerts && b.Max > 0 {
			for j, p := range ratelimit.AlertPercents {
				t[j] = ratelimit.Threshold(b.Max, p)
			}
		}
		args = append(args, expiry(ends[i]), t[0], t[1])
	}
	vals, err := s.run(ctx, s.spend, keys, args, 2*len(budgets))
	if err != nil {
		return nil, fmt.Errorf("charging %d in redis: %w", amount, err)
	}
	var alerts []ratelimit.Alert
	for i, b := range budgets {
		for j, p := range ratelimit.AlertPercents {
			if vals[2*i+1]&(1<<j) != 0 {
				alerts = append(alerts, ratelimit.Alert{Budget: b, Percent: p, Spent: vals[2*i], Renews: ends[i]})
			}
		}
	}
	return alerts, nil
}

// Seed implements ratelimit.Seedable in one script call.
func (s *Spender) Seed(ctx context.Context, budgets []ratelimit.Budget, at time.Time, amounts []int64) error {
	if err := check(ctx, ratelimit.ValidateBudgets(budgets)); err != nil {
		return err
	}
	if len(amounts) != len(budgets) {
		return fmt.Errorf("%w: %d amounts for %d budgets", ratelimit.ErrInvalid, len(amounts), len(budgets))
	}
	if len(budgets) == 0 {
		return nil
	}
	keys, ends := s.keys(budgets, at)
	args := make([]any, 0, 3*len(budgets))
	for i, b := range budgets {
		n := min(max(amounts[i], 0), ratelimit.MaxSpend)
		mask := 0
		if b.Alerts && b.Max > 0 {
			for j, p := range ratelimit.AlertPercents {
				if n >= ratelimit.Threshold(b.Max, p) {
					mask |= 1 << j
				}
			}
		}
		args = append(args, n, expiry(ends[i]), mask)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.seed.Run(ctx, s.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("seeding budgets in redis: %w", err)
	}
	return nil
}

// Spent implements ratelimit.Spender in one script call.
func (s *Spender) Spent(ctx context.Context, budgets []ratelimit.Budget, at time.Time) ([]int64, error) {
	if err := check(ctx, ratelimit.ValidateBudgets(budgets)); err != nil {
		return nil, err
	}
	if len(budgets) == 0 {
		return []int64{}, nil
	}
	keys, _ := s.keys(budgets, at)
	vals, err := s.run(ctx, s.spent, keys, nil, len(budgets))
	if err != nil {
		return nil, fmt.Errorf("reading budgets in redis: %w", err)
	}
	return vals, nil
}

// keys returns the budgets' counter keys and period ends at at.
func (s *Spender) keys(budgets []ratelimit.Budget, at time.Time) ([]string, []time.Time) {
	keys := make([]string, len(budgets))
	ends := make([]time.Time, len(budgets))
	for i, b := range budgets {
		keys[i] = s.prefix + b.Counter(at)
		_, ends[i] = b.Period(at)
	}
	return keys, ends
}

func expiry(end time.Time) string {
	return strconv.FormatInt(end.Add(ratelimit.SpendGrace).UnixMilli(), 10)
}

// run runs a script under the timeout and checks it returned n integers.
func (s *Spender) run(ctx context.Context, script *goredis.Script, keys []string, args []any, n int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	vals, err := script.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(vals) != n {
		return nil, fmt.Errorf("script returned %d values, want %d", len(vals), n)
	}
	return vals, nil
}

// check returns ctx's error, else invalid.
func check(ctx context.Context, invalid error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return invalid
}

var _ ratelimit.Seedable = (*Spender)(nil)
