package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// MaxSpend bounds a Budget's Max and a spend amount, in billionths of the
// currency unit: counters stay exact in Redis, whose Lua numbers are
// doubles, up to 2^53. It is about 9 million units per period.
const MaxSpend = 1 << 53

// MinWindow is the shortest fixed window a Budget may renew on.
const MinWindow = time.Minute

// SpendGrace is how long a period's counter outlives the period's end in
// the Spenders of ratelimit/memory and ratelimit/redis: an exchange that
// began in a period settles there.
const SpendGrace = time.Hour

// Renewal is how a Budget's period renews.
type Renewal uint8

// The renewals.
const (
	// Daily budgets renew at midnight UTC.
	Daily Renewal = iota + 1
	// Monthly budgets renew on the first of the month at midnight UTC.
	Monthly
	// Windowed budgets renew every Window, counted from the Unix epoch:
	// fixed windows every replica agrees on without coordination.
	Windowed
)

// String returns the renewal's name as configured: day, month or window.
func (r Renewal) String() string {
	switch r {
	case Daily:
		return "day"
	case Monthly:
		return "month"
	case Windowed:
		return "window"
	}
	return "renewal(" + strconv.Itoa(int(r)) + ")"
}

// Budget is a limit on money spent by a subject ("key:<id>",
// "account:<id>", "group:<id>") per period. Amounts are billionths of a
// currency unit, as authz/pricing counts them.
type Budget struct {
	Key string
	// Max is what the subject may spend per period. Zero allows nothing.
	Max     int64
	Renewal Renewal
	// Window is the length of a Windowed budget's periods, at least
	// MinWindow and a whole number of seconds; zero otherwise.
	Window time.Duration
	// Alerts asks Charge to report when spending first reaches 80 % and
	// 100 % of Max in a period.
	Alerts bool
}

// Validate reports a malformed budget, wrapping ErrInvalid.
func (b Budget) Validate() error {
	switch {
	case b.Key == "":
		return fmt.Errorf("%w: budget without a key", ErrInvalid)
	case b.Max < 0 || b.Max > MaxSpend:
		return fmt.Errorf("%w: budget %s max %d out of range", ErrInvalid, b.Key, b.Max)
	case b.Renewal < Daily || b.Renewal > Windowed:
		return fmt.Errorf("%w: budget %s renews %s", ErrInvalid, b.Key, b.Renewal)
	case b.Renewal == Windowed && (b.Window < MinWindow || b.Window%time.Second != 0):
		return fmt.Errorf("%w: budget %s window %v: want whole seconds, at least %v", ErrInvalid, b.Key, b.Window, MinWindow)
	case b.Renewal != Windowed && b.Window != 0:
		return fmt.Errorf("%w: budget %s renews %s with a window", ErrInvalid, b.Key, b.Renewal)
	}
	return nil
}

// Period returns the period holding at: [start, end).
func (b Budget) Period(at time.Time) (start, end time.Time) {
	at = at.UTC()
	switch b.Renewal {
	case Daily:
		start = time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	case Monthly:
		start = time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	w := b.Window.Milliseconds()
	ms := at.UnixMilli()
	ms -= ((ms % w) + w) % w
	start = time.UnixMilli(ms).UTC()
	return start, start.Add(b.Window)
}

// Counter names the counter of the period holding at. A budget's counter
// depends on its subject and period, not on Max: changing the amount keeps
// what was spent; changing the renewal starts afresh.
func (b Budget) Counter(at time.Time) string {
	start, _ := b.Period(at)
	code := "d"
	switch b.Renewal {
	case Monthly:
		code = "m"
	case Windowed:
		code = "w" + strconv.FormatInt(int64(b.Window/time.Second), 10)
	}
	return b.Key + ":$" + code + ":" + strconv.FormatInt(start.Unix(), 10)
}

// ValidateBudgets reports malformed budgets, wrapping ErrInvalid. Two
// budgets of one call must not share a counter: a request would count
// twice.
func ValidateBudgets(budgets []Budget) error {
	for i, b := range budgets {
		if err := b.Validate(); err != nil {
			return err
		}
		for _, o := range budgets[:i] {
			if o.Key == b.Key && o.Renewal == b.Renewal && o.Window == b.Window {
				return fmt.Errorf("%w: budget %d duplicates %s", ErrInvalid, i, b.Key)
			}
		}
	}
	return nil
}

// ValidateReserve reports malformed Reserve arguments, wrapping
// ErrInvalid: invalid budgets, or an amount out of [0, MaxSpend].
func ValidateReserve(budgets []Budget, amount int64) error {
	if amount < 0 || amount > MaxSpend {
		return fmt.Errorf("%w: reserving %d", ErrInvalid, amount)
	}
	return ValidateBudgets(budgets)
}

// ValidateSpend reports malformed Charge arguments, wrapping ErrInvalid:
// invalid budgets, or an amount beyond ±MaxSpend. Negative amounts
// (refunds) are valid.
func ValidateSpend(budgets []Budget, amount int64) error {
	if amount < -MaxSpend || amount > MaxSpend {
		return fmt.Errorf("%w: charging %d", ErrInvalid, amount)
	}
	return ValidateBudgets(budgets)
}

// AlertPercents are the shares of Max at which Charge reports an Alert.
var AlertPercents = [...]int{80, 100}

// BudgetStatus is one budget's state after a Reserve.
type BudgetStatus struct {
	Budget Budget
	// Allowed reports whether this budget alone would admit the request:
	// what it has spent and reserved is under Max.
	Allowed bool
	// Spent is what the period's counter held after the decision: settled
	// spending plus the reservations of exchanges in flight.
	Spent int64
	// Renews is when the period ends.
	Renews time.Time
}

// SpendDecision is the outcome of Reserve.
type SpendDecision struct {
	// Allowed reports whether every budget admitted the request; only then
	// was anything reserved.
	Allowed bool
	// Statuses has one entry per budget, in the order given to Reserve.
	Statuses []BudgetStatus
}

// Refused returns the first refusing budget's status; ok is false when the
// decision allowed.
func (d SpendDecision) Refused() (s BudgetStatus, ok bool) {
	for _, s := range d.Statuses {
		if !s.Allowed {
			return s, true
		}
	}
	return BudgetStatus{}, false
}

// Alert reports that a budget's counter reached Percent of its Max for the
// first time in a period.
type Alert struct {
	Budget  Budget
	Percent int
	Spent   int64
	Renews  time.Time
}

// Spender enforces money budgets: a counter per budget and period.
// Implementations are safe for concurrent use and pass the suite in
// ratelimit/limitertest (RunSpender). The caller passes the time, so that
// the reservation and the charge of one exchange land in the same period
// however long it lasts. An error means nothing was decided or done.
type Spender interface {
	// Reserve admits a request when every budget's counter, for the period
	// holding at, is below its Max, and then adds amount (the exchange's
	// estimated cost, or zero) to each, atomically. If any budget refuses,
	// nothing is added. No budgets admit the request.
	//
	// Counting reservations makes concurrent requests see each other's
	// cost: a subject never spends more than its Max plus one request's
	// reservation, as long as each exchange costs no more than it reserved.
	Reserve(ctx context.Context, budgets []Budget, at time.Time, amount int64) (SpendDecision, error)
	// Charge adds a signed amount to each budget's counter for the period
	// holding at (the reservation's at, to settle it): the exchange's cost
	// minus what it reserved. Counters never go below zero. It returns the
	// alerts of budgets with Alerts whose counter reached one of
	// AlertPercents for the first time in the period.
	Charge(ctx context.Context, budgets []Budget, at time.Time, amount int64) ([]Alert, error)
	// Spent returns each budget's counter for the period holding at.
	Spent(ctx context.Context, budgets []Budget, at time.Time) ([]int64, error)
}

// Threshold is the counter value at which a budget of max reaches
// percent: the smallest whole amount at or above percent of max.
func Threshold(max int64, percent int) int64 {
	return (max*int64(percent) + 99) / 100 // max ≤ 2^53: no overflow
}
