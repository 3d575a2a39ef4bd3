package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrInvalid is returned for a malformed rule or argument. It is a
// programming or configuration error, not a refusal.
var ErrInvalid = errors.New("invalid rate limit")

// DefaultLeaseTTL is how long a concurrency slot is held when its Limit has
// no Window and the exchange never calls Release (a crashed replica). Long
// enough for slow reasoning streams, short enough that leaks heal.
const DefaultLeaseTTL = 15 * time.Minute

// ConcurrencyRetryAfter is the RetryAfter of a concurrency refusal. A slot
// frees when another exchange ends, which nobody can predict, so clients get
// a short hint instead of a promise.
const ConcurrencyRetryAfter = time.Second

// maxMax keeps counts exact in Redis, whose Lua numbers are doubles.
const maxMax = 1 << 50

// Kind is what a Limit counts.
type Kind uint8

// The kinds of limit.
const (
	// Requests counts admitted requests per Window. Admit consumes one.
	Requests Kind = iota + 1
	// Tokens counts tokens per Window. Admit reserves the tokens it is
	// asked to (see Limiter.Admit); Charge then settles the difference with
	// what the exchange really used, even past the limit.
	Tokens
	// Concurrent counts requests in flight. Admit takes a slot; Release
	// frees it.
	Concurrent
)

// String returns the kind's name as used in the OpenAI header suffixes.
func (k Kind) String() string {
	switch k {
	case Requests:
		return "requests"
	case Tokens:
		return "tokens"
	case Concurrent:
		return "concurrent"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Limit is one ceiling: Max requests or tokens per Window, or Max requests
// in flight.
type Limit struct {
	Kind Kind
	// Max is the number of requests or tokens per Window, or of requests in
	// flight. It must be positive.
	Max int64
	// Window is the period over which Max fully replenishes, at least a
	// millisecond. For Concurrent it is the longest a slot is held if never
	// released; zero means DefaultLeaseTTL.
	Window time.Duration
}

// RequestsPerMinute limits admitted requests per minute.
func RequestsPerMinute(n int64) Limit { return Limit{Kind: Requests, Max: n, Window: time.Minute} }

// TokensPerMinute limits charged tokens per minute.
func TokensPerMinute(n int64) Limit { return Limit{Kind: Tokens, Max: n, Window: time.Minute} }

// TokensPerDay limits charged tokens per day.
func TokensPerDay(n int64) Limit { return Limit{Kind: Tokens, Max: n, Window: 24 * time.Hour} }

// ConcurrentRequests limits requests in flight.
func ConcurrentRequests(n int64) Limit { return Limit{Kind: Concurrent, Max: n} }

// Validate reports a malformed limit, wrapping ErrInvalid.
func (l Limit) Validate() error {
	switch {
	case l.Kind < Requests || l.Kind > Concurrent:
		return fmt.Errorf("%w: unknown kind %d", ErrInvalid, l.Kind)
	case l.Max <= 0 || l.Max > maxMax:
		return fmt.Errorf("%w: %s max %d out of range", ErrInvalid, l.Kind, l.Max)
	case l.Window < 0 || (l.Kind != Concurrent && l.Window < time.Millisecond):
		return fmt.Errorf("%w: %s window %v too short", ErrInvalid, l.Kind, l.Window)
	}
	return nil
}

// LeaseTTL is how long a Concurrent slot lives without Release.
func (l Limit) LeaseTTL() time.Duration {
	if l.Window == 0 {
		return DefaultLeaseTTL
	}
	return l.Window
}

// Rule applies a Limit to a subject such as "key:<id>", "account:<id>" or
// "group:<id>". The caller picks the Key; prefixes keep subjects of
// different types apart.
type Rule struct {
	Key   string
	Limit Limit
}

// StateKey names the counter a rule reads and writes. Rules with the same
// subject, kind and window share usage whatever their Max, so changing a
// limit keeps the usage already counted; concurrency slots are shared per
// subject. Implementations key their storage by it.
func (r Rule) StateKey() string {
	switch r.Limit.Kind {
	case Requests:
		return r.Key + ":r:" + strconv.FormatInt(r.Limit.Window.Milliseconds(), 10)
	case Tokens:
		return r.Key + ":t:" + strconv.FormatInt(r.Limit.Window.Milliseconds(), 10)
	}
	return r.Key + ":c"
}

// sameState reports whether two rules would share a counter.
func (r Rule) sameState(o Rule) bool {
	if r.Key != o.Key || r.Limit.Kind != o.Limit.Kind {
		return false
	}
	return r.Limit.Kind == Concurrent || r.Limit.Window.Milliseconds() == o.Limit.Window.Milliseconds()
}

// Validate reports malformed rules, wrapping ErrInvalid. Two rules of one
// call must not share a counter: one request would count twice.
func Validate(rules []Rule) error {
	for i, r := range rules {
		if r.Key == "" {
			return fmt.Errorf("%w: rule %d has no key", ErrInvalid, i)
		}
		if err := r.Limit.Validate(); err != nil {
			return fmt.Errorf("rule %d (%s): %w", i, r.Key, err)
		}
		for _, o := range rules[:i] {
			if r.sameState(o) {
				return fmt.Errorf("%w: rule %d duplicates counter %s", ErrInvalid, i, r.StateKey())
			}
		}
	}
	return nil
}

// ValidateAdmit reports malformed Admit arguments: invalid rules, or a
// reservation that is negative or beyond what counters hold exactly,
// wrapping ErrInvalid.
func ValidateAdmit(rules []Rule, reserve int64) error {
	if reserve < 0 || reserve > maxMax {
		return fmt.Errorf("%w: reserving %d tokens", ErrInvalid, reserve)
	}
	return Validate(rules)
}

// ValidateCharge reports malformed Charge arguments: invalid rules, or an
// adjustment beyond what counters hold exactly, wrapping ErrInvalid.
// Negative adjustments (refunds) are valid.
func ValidateCharge(rules []Rule, tokens int64) error {
	if tokens < -maxMax || tokens > maxMax {
		return fmt.Errorf("%w: charging %d tokens", ErrInvalid, tokens)
	}
	return Validate(rules)
}

// Need is how many free tokens a Tokens rule must have for Admit to
// reserve reserve tokens: reserve capped at Max, and at least one (a
// reservation of zero only checks that the budget is not spent).
func (l Limit) Need(reserve int64) int64 {
	return max(1, min(reserve, l.Max))
}

// Status is one rule's view of an admission: what the x-ratelimit-* headers
// of its kind report.
type Status struct {
	Rule Rule
	// Allowed reports whether this rule alone would admit the request.
	Allowed bool
	// Remaining is what is left after the decision: requests (this one
	// included when admitted), whole tokens (after the reservation when
	// admitted), or free slots. Never negative.
	Remaining int64
	// Reset is how long until usage drains to nothing (x-ratelimit-reset-*).
	// Zero for Concurrent.
	Reset time.Duration
	// RetryAfter, when the rule refuses, is how long until it would admit
	// the same request absent other traffic (for Tokens, until Need(reserve)
	// tokens are free); zero when it allows.
	RetryAfter time.Duration
}

// Lease names the concurrency slots an admission holds. The zero Lease
// holds none.
type Lease struct {
	// ID is unique per admission.
	ID string
	// Rules are the Concurrent rules holding a slot under ID.
	Rules []Rule
}

// Decision is the outcome of Admit.
type Decision struct {
	// Allowed reports whether every rule admitted the request; only then was
	// anything consumed.
	Allowed bool
	// RetryAfter, when refused, is the longest RetryAfter of the refusing
	// rules: the Retry-After header. Zero when allowed.
	RetryAfter time.Duration
	// Statuses has one entry per rule, in the order given to Admit.
	Statuses []Status
	// Lease holds the concurrency slots taken; pass it to Release when the
	// exchange ends. Zero when refused or without Concurrent rules.
	Lease Lease
}

// Tightest returns the status of kind k with the least Remaining (then the
// longest RetryAfter, then Reset): the rule an x-ratelimit-*-<kind> header
// set should describe. ok is false when no rule has that kind.
func (d Decision) Tightest(k Kind) (s Status, ok bool) {
	for _, st := range d.Statuses {
		if st.Rule.Limit.Kind != k {
			continue
		}
		if !ok || tighter(st, s) {
			s, ok = st, true
		}
	}
	return s, ok
}

func tighter(a, b Status) bool {
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	if a.RetryAfter != b.RetryAfter {
		return a.RetryAfter > b.RetryAfter
	}
	return a.Reset > b.Reset
}

// Limiter enforces rules. Implementations are safe for concurrent use and
// pass the suite in ratelimit/limitertest. An error means no decision was
// made (the backend failed, ctx ended, or a rule is invalid): the caller
// chooses to fail open or closed.
type Limiter interface {
	// Admit decides on all rules at once, when a request arrives, and
	// reserves reserve tokens (the caller's estimate of what the exchange
	// will use; negative is ErrInvalid). A Tokens rule allows when at least
	// Limit.Need(reserve) tokens are free: min(reserve, Max), or one when
	// reserve is zero. The cap at Max lets a request larger than the whole
	// budget through on an idle bucket rather than never; it then consumes
	// its full reservation, leaving the bucket in debt. If every rule
	// allows, Admit consumes, atomically, one request of each Requests rule,
	// a slot of each Concurrent rule (returned as Decision.Lease) and
	// reserve tokens of each Tokens rule. If any rule refuses, nothing is
	// consumed. No rules admit the request.
	Admit(ctx context.Context, rules []Rule, reserve int64) (Decision, error)
	// Charge adjusts every Tokens rule by a signed number of tokens. A
	// positive adjustment adds usage, even past Max: later admissions are
	// refused until usage drains back. A negative one refunds an unused
	// reservation, never below empty (a refund larger than the usage left
	// empties the bucket and no more). Other kinds are ignored; zero does
	// nothing. Callers reserve at Admit and, when the exchange ends however
	// it ends, call Charge(actual - reserved) once, on a context that
	// outlives the client (Charge(actual) when Admit failed open and
	// reserved nothing).
	Charge(ctx context.Context, rules []Rule, tokens int64) error
	// Release frees a lease's slots. Releasing twice, an expired lease or
	// the zero Lease is harmless.
	Release(ctx context.Context, lease Lease) error
}
