package limitertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"modelgate/ratelimit"
)

// Clock is a fake time source, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Start is where the suite's clocks begin: a fixed instant, so results do
// not depend on the wall clock.
func Start() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }

// NewLimiter returns an empty Limiter that reads time only from now. It
// registers its own cleanup.
type NewLimiter func(t *testing.T, now func() time.Time) ratelimit.Limiter

// Run runs the suite. Subtests run in parallel, each on its own limiter and
// clock.
func Run(t *testing.T, newLimiter NewLimiter) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l ratelimit.Limiter, c *Clock)
	}{
		{"NoRules", testNoRules},
		{"Invalid", testInvalid},
		{"ExactUnderConcurrency", testExactUnderConcurrency},
		{"RemainingAndReset", testRemainingAndReset},
		{"RetryAfter", testRetryAfter},
		{"TokensChargedAfterTheFact", testTokensChargedAfterTheFact},
		{"ReserveZero", testReserveZero},
		{"ReservationsUnderConcurrency", testReservationsUnderConcurrency},
		{"ReservationsNeverExceedMax", testReservationsNeverExceedMax},
		{"RefundMakesRoom", testRefundMakesRoom},
		{"ReservationCappedAtMax", testReservationCappedAtMax},
		{"ConcurrentCharges", testConcurrentCharges},
		{"RefusalConsumesNothing", testRefusalConsumesNothing},
		{"Concurrency", testConcurrency},
		{"LeaseExpiry", testLeaseExpiry},
		{"Independence", testIndependence},
		{"WindowExpiry", testWindowExpiry},
		{"ChangedMaxKeepsUsage", testChangedMaxKeepsUsage},
		{"ClockBehind", testClockBehind},
		{"DoneContext", testDoneContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewClock(Start())
			tt.fn(t, newLimiter(t, c.Now), c)
		})
	}
}

func admit(t *testing.T, l ratelimit.Limiter, rules ...ratelimit.Rule) ratelimit.Decision {
	t.Helper()
	return admitReserving(t, l, 0, rules...)
}

func admitReserving(t *testing.T, l ratelimit.Limiter, reserve int64, rules ...ratelimit.Rule) ratelimit.Decision {
	t.Helper()
	d, err := l.Admit(context.Background(), rules, reserve)
	if err != nil {
		t.Fatalf("Admit(%v, reserve %d): %v", rules, reserve, err)
	}
	if len(d.Statuses) != len(rules) {
		t.Fatalf("Admit(%v) returned %d statuses, want %d", rules, len(d.Statuses), len(rules))
	}
	for i, s := range d.Statuses {
		if s.Rule != rules[i] {
			t.Fatalf("Admit status %d is for %v, want %v", i, s.Rule, rules[i])
		}
	}
	return d
}

func charge(t *testing.T, l ratelimit.Limiter, tokens int64, rules ...ratelimit.Rule) {
	t.Helper()
	if err := l.Charge(context.Background(), rules, tokens); err != nil {
		t.Fatalf("Charge(%v, %d): %v", rules, tokens, err)
	}
}

func release(t *testing.T, l ratelimit.Limiter, lease ratelimit.Lease) {
	t.Helper()
	if err := l.Release(context.Background(), lease); err != nil {
		t.Fatalf("Release(%v): %v", lease, err)
	}
}

// within reports whether got is want up to a second, the precision the
// Retry-After and x-ratelimit-reset-* headers need.
func within(got, want time.Duration) bool {
	return got >= want-time.Second && got <= want+time.Second
}

func testNoRules(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	d := admit(t, l)
	if !d.Allowed || d.RetryAfter != 0 || d.Lease.ID != "" || len(d.Lease.Rules) != 0 {
		t.Errorf("Admit() = %+v, want allowed with nothing held", d)
	}
}

func testInvalid(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	rpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(1)}
	for name, rules := range map[string][]ratelimit.Rule{
		"no key":         {{Limit: ratelimit.RequestsPerMinute(1)}},
		"zero max":       {{Key: "k", Limit: ratelimit.RequestsPerMinute(0)}},
		"negative max":   {{Key: "k", Limit: ratelimit.ConcurrentRequests(-1)}},
		"no window":      {{Key: "k", Limit: ratelimit.Limit{Kind: ratelimit.Tokens, Max: 1}}},
		"tiny window":    {{Key: "k", Limit: ratelimit.Limit{Kind: ratelimit.Requests, Max: 1, Window: time.Microsecond}}},
		"unknown kind":   {{Key: "k", Limit: ratelimit.Limit{Max: 1, Window: time.Second}}},
		"shared counter": {rpm, {Key: "key:k", Limit: ratelimit.Limit{Kind: ratelimit.Requests, Max: 9, Window: time.Minute}}},
	} {
		if _, err := l.Admit(context.Background(), rules, 0); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("Admit(%s) error = %v, want ErrInvalid", name, err)
		}
		if err := l.Charge(context.Background(), rules, 1); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("Charge(%s) error = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := l.Admit(context.Background(), []ratelimit.Rule{rpm}, -1); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Admit(reserve -1) error = %v, want ErrInvalid", err)
	}
	if err := l.Charge(context.Background(), []ratelimit.Rule{rpm}, -1); err != nil {
		t.Errorf("Charge(-1 tokens) error = %v, want nil: refunds are valid", err)
	}
	if d := admit(t, l, rpm); !d.Allowed || d.Statuses[0].Remaining != 0 {
		t.Errorf("Admit after invalid calls = %+v, want the first request admitted", d)
	}
}

func testExactUnderConcurrency(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	for _, tc := range []struct {
		name string
		rule ratelimit.Rule
	}{
		{"requests", ratelimit.Rule{Key: "key:burst", Limit: ratelimit.RequestsPerMinute(10)}},
		{"concurrent", ratelimit.Rule{Key: "key:burst", Limit: ratelimit.ConcurrentRequests(10)}},
	} {
		decisions := make([]ratelimit.Decision, 30)
		var wg sync.WaitGroup
		for i := range decisions {
			wg.Go(func() {
				d, err := l.Admit(context.Background(), []ratelimit.Rule{tc.rule}, 0)
				if err != nil {
					t.Errorf("%s: Admit: %v", tc.name, err)
				}
				decisions[i] = d
			})
		}
		wg.Wait()
		var remaining []int64
		leases := map[string]bool{}
		for _, d := range decisions {
			if !d.Allowed {
				if d.RetryAfter <= 0 || d.Lease.ID != "" || d.Statuses[0].Remaining != 0 {
					t.Errorf("%s: refusal %+v, want RetryAfter > 0, no lease, nothing remaining", tc.name, d)
				}
				continue
			}
			remaining = append(remaining, d.Statuses[0].Remaining)
			leases[d.Lease.ID] = true
		}
		slices.Sort(remaining)
		if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(remaining, want) {
			t.Errorf("%s: 30 concurrent admissions against 10: remaining of the admitted = %v, want %v", tc.name, remaining, want)
		}
		if tc.rule.Limit.Kind == ratelimit.Concurrent && len(leases) != 10 {
			t.Errorf("%s: %d distinct leases, want 10", tc.name, len(leases))
		}
	}
}

func testRemainingAndReset(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	r := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(3)}
	for i, want := range []struct {
		allowed   bool
		remaining int64
		reset     time.Duration
	}{{true, 2, 20 * time.Second}, {true, 1, 40 * time.Second}, {true, 0, time.Minute}, {false, 0, time.Minute}} {
		s := admit(t, l, r).Statuses[0]
		if s.Allowed != want.allowed || s.Remaining != want.remaining || !within(s.Reset, want.reset) {
			t.Errorf("admission %d: %+v, want allowed %v, remaining %d, reset %v", i+1, s, want.allowed, want.remaining, want.reset)
		}
	}
}

// testRetryAfter checks that RetryAfter is never early and at most a second
// late: refused a second before it, admitted at it.
func testRetryAfter(t *testing.T, l ratelimit.Limiter, c *Clock) {
	for _, tc := range []struct {
		name    string
		rule    ratelimit.Rule
		fill    func(r ratelimit.Rule)
		reserve int64
		retry   time.Duration
		reset   time.Duration
		remain  int64
	}{{
		name: "10 requests per minute",
		rule: ratelimit.Rule{Key: "key:a", Limit: ratelimit.RequestsPerMinute(10)},
		fill: func(r ratelimit.Rule) {
			for range 10 {
				admit(t, l, r)
			}
		},
		retry: 6 * time.Second, reset: time.Minute, remain: 0,
	}, {
		name: "3 requests per 10s",
		rule: ratelimit.Rule{Key: "key:b", Limit: ratelimit.Limit{Kind: ratelimit.Requests, Max: 3, Window: 10 * time.Second}},
		fill: func(r ratelimit.Rule) {
			for range 3 {
				admit(t, l, r)
			}
		},
		retry: 3334 * time.Millisecond, reset: 10 * time.Second, remain: 0,
	}, {
		name:  "1500 tokens charged against 1000 per minute",
		rule:  ratelimit.Rule{Key: "key:c", Limit: ratelimit.TokensPerMinute(1000)},
		fill:  func(r ratelimit.Rule) { charge(t, l, 1500, r) },
		retry: 30060 * time.Millisecond, reset: 90 * time.Second, remain: 0,
	}, {
		name:    "reserving 400 with 800 of 1000 tokens per minute used",
		rule:    ratelimit.Rule{Key: "key:d", Limit: ratelimit.TokensPerMinute(1000)},
		fill:    func(r ratelimit.Rule) { admitReserving(t, l, 800, r) },
		reserve: 400,
		retry:   12 * time.Second, reset: 48 * time.Second, remain: 200,
	}, {
		name:    "reserving 5000, capped at the 1000 per minute, with 300 used",
		rule:    ratelimit.Rule{Key: "key:e", Limit: ratelimit.TokensPerMinute(1000)},
		fill:    func(r ratelimit.Rule) { charge(t, l, 300, r) },
		reserve: 5000,
		retry:   18 * time.Second, reset: 18 * time.Second, remain: 700,
	}} {
		tc.fill(tc.rule)
		d := admitReserving(t, l, tc.reserve, tc.rule)
		s := d.Statuses[0]
		if d.Allowed || !within(d.RetryAfter, tc.retry) || s.RetryAfter != d.RetryAfter || !within(s.Reset, tc.reset) || s.Remaining != tc.remain {
			t.Errorf("%s: refusal = %+v, want RetryAfter %v, reset %v, remaining %d", tc.name, d, tc.retry, tc.reset, tc.remain)
			continue
		}
		c.Advance(d.RetryAfter - time.Second)
		if early := admitReserving(t, l, tc.reserve, tc.rule); early.Allowed {
			t.Errorf("%s: admitted a second before RetryAfter %v: %+v", tc.name, d.RetryAfter, early)
		}
		c.Advance(time.Second)
		if late := admitReserving(t, l, tc.reserve, tc.rule); !late.Allowed {
			t.Errorf("%s: refused at RetryAfter %v: %+v", tc.name, d.RetryAfter, late)
		}
	}
}

func testTokensChargedAfterTheFact(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	tpm := ratelimit.Rule{Key: "account:a", Limit: ratelimit.TokensPerMinute(1000)}
	tpd := ratelimit.Rule{Key: "account:a", Limit: ratelimit.TokensPerDay(10000)}
	for range 3 {
		if s := admit(t, l, tpm).Statuses[0]; !s.Allowed || s.Remaining != 1000 || s.Reset != 0 {
			t.Fatalf("Admit before any charge = %+v, want a full budget: admission consumes no tokens", s)
		}
	}
	charge(t, l, 400, tpm, tpd)
	d := admit(t, l, tpm, tpd)
	if !d.Allowed || d.Statuses[0].Remaining != 600 || !within(d.Statuses[0].Reset, 24*time.Second) || d.Statuses[1].Remaining != 9600 {
		t.Errorf("Admit after charging 400 = %+v, want 600 of 1000 (reset 24s) and 9600 of 10000 left", d)
	}
	charge(t, l, 900, tpm, tpd) // more than the 600 left: usage may overrun
	d = admit(t, l, tpm, tpd)
	if d.Allowed || d.Statuses[0].Allowed || d.Statuses[0].Remaining != 0 || !d.Statuses[1].Allowed || d.Statuses[1].Remaining != 8700 {
		t.Errorf("Admit after overrunning to 1300 of 1000 = %+v, want refused by the minute, 8700 left for the day", d)
	}
	if !within(d.RetryAfter, 18060*time.Millisecond) {
		t.Errorf("RetryAfter after overrun = %v, want 18.06s (301 tokens at 1000/min)", d.RetryAfter)
	}
	rpm := ratelimit.Rule{Key: "account:a", Limit: ratelimit.RequestsPerMinute(5)}
	charge(t, l, 1000, rpm)
	charge(t, l, 0, tpm)
	if s := admit(t, l, rpm).Statuses[0]; s.Remaining != 4 {
		t.Errorf("requests rule after Charge = %+v, want 4 left: Charge ignores other kinds", s)
	}
}

func testConcurrentCharges(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	tpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerMinute(1000)}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := l.Charge(context.Background(), []ratelimit.Rule{tpm}, 49); err != nil {
				t.Errorf("Charge: %v", err)
			}
		})
	}
	wg.Wait()
	if s := admit(t, l, tpm).Statuses[0]; s.Remaining != 20 {
		t.Errorf("after 20 concurrent charges of 49 = %+v, want exactly 20 of 1000 left", s)
	}
}

func testRefusalConsumesNothing(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	key := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(5)}
	acct := ratelimit.Rule{Key: "account:a", Limit: ratelimit.RequestsPerMinute(2)}
	slots := ratelimit.Rule{Key: "key:k", Limit: ratelimit.ConcurrentRequests(3)}
	tokens := ratelimit.Rule{Key: "group:g", Limit: ratelimit.TokensPerMinute(100)}
	rules := []ratelimit.Rule{key, acct, slots, tokens}
	for range 2 {
		if d := admit(t, l, rules...); !d.Allowed {
			t.Fatalf("Admit = %+v, want allowed", d)
		}
	}
	d := admit(t, l, rules...)
	if d.Allowed || d.Lease.ID != "" || !d.Statuses[0].Allowed || d.Statuses[1].Allowed || !d.Statuses[2].Allowed || !d.Statuses[3].Allowed {
		t.Fatalf("third Admit = %+v, want refused by the account rule alone, no lease", d)
	}
	if d.RetryAfter != d.Statuses[1].RetryAfter {
		t.Errorf("RetryAfter = %v, want the account rule's %v", d.RetryAfter, d.Statuses[1].RetryAfter)
	}
	if s, ok := d.Tightest(ratelimit.Requests); !ok || s.Rule != acct {
		t.Errorf("Tightest(Requests) = %+v, %v; want the account rule", s, ok)
	}
	if s := admit(t, l, key).Statuses[0]; s.Remaining != 2 {
		t.Errorf("key rule after the refusal = %+v, want 2 left (5 - 2 admitted - this one)", s)
	}
	d = admit(t, l, slots)
	if s := d.Statuses[0]; !s.Allowed || s.Remaining != 0 {
		t.Errorf("slots after the refusal = %+v, want the third slot free", s)
	}
	release(t, l, d.Lease)

	fresh := ratelimit.Rule{Key: "key:other", Limit: ratelimit.RequestsPerMinute(5)}
	charge(t, l, 100, tokens)
	if d := admit(t, l, fresh, tokens); d.Allowed || !d.Statuses[0].Allowed || d.Statuses[1].Allowed {
		t.Errorf("Admit with the token budget spent = %+v, want refused by the tokens rule", d)
	}
	if s := admit(t, l, fresh).Statuses[0]; s.Remaining != 4 {
		t.Errorf("requests rule after a token refusal = %+v, want 4 left", s)
	}
}

func testConcurrency(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	r := ratelimit.Rule{Key: "key:k", Limit: ratelimit.Limit{Kind: ratelimit.Concurrent, Max: 2, Window: time.Minute}}
	a, b := admit(t, l, r), admit(t, l, r)
	if !a.Allowed || !b.Allowed || a.Statuses[0].Remaining != 1 || b.Statuses[0].Remaining != 0 {
		t.Fatalf("two admissions = %+v, %+v; want both allowed, 1 then 0 left", a, b)
	}
	if a.Lease.ID == "" || a.Lease.ID == b.Lease.ID || !slices.Equal(a.Lease.Rules, []ratelimit.Rule{r}) {
		t.Errorf("leases = %+v, %+v; want distinct IDs holding the rule", a.Lease, b.Lease)
	}
	full := admit(t, l, r)
	if full.Allowed || full.RetryAfter != ratelimit.ConcurrencyRetryAfter || full.Statuses[0].Remaining != 0 || full.Lease.ID != "" {
		t.Errorf("third admission = %+v, want refused with RetryAfter %v", full, ratelimit.ConcurrencyRetryAfter)
	}
	release(t, l, a.Lease)
	c := admit(t, l, r)
	if !c.Allowed {
		t.Errorf("admission after Release = %+v, want allowed", c)
	}
	release(t, l, a.Lease)
	release(t, l, ratelimit.Lease{})
	if d := admit(t, l, r); d.Allowed {
		t.Errorf("admission after releasing a lease twice = %+v, want refused: a double release frees nothing", d)
	}
	release(t, l, b.Lease)
	release(t, l, c.Lease)
	if d := admit(t, l, r); !d.Allowed || d.Statuses[0].Remaining != 1 {
		t.Errorf("admission after releasing all = %+v, want 1 left", d)
	}
}

func testLeaseExpiry(t *testing.T, l ratelimit.Limiter, c *Clock) {
	short := ratelimit.Rule{Key: "key:short", Limit: ratelimit.Limit{Kind: ratelimit.Concurrent, Max: 1, Window: time.Minute}}
	dflt := ratelimit.Rule{Key: "key:default", Limit: ratelimit.ConcurrentRequests(1)}
	old, held := admit(t, l, short), admit(t, l, dflt)
	if !old.Allowed || !held.Allowed {
		t.Fatalf("Admit = %+v, %+v; want allowed", old, held)
	}
	c.Advance(time.Minute)
	if d := admit(t, l, short); !d.Allowed {
		t.Errorf("Admit a Window after an unreleased lease = %+v, want its slot back", d)
	}
	release(t, l, old.Lease) // expired: must not free the new holder's slot
	if d := admit(t, l, short); d.Allowed {
		t.Errorf("Admit after releasing an expired lease = %+v, want refused", d)
	}
	c.Advance(ratelimit.DefaultLeaseTTL - time.Minute - time.Second)
	if d := admit(t, l, dflt); d.Allowed {
		t.Errorf("Admit a second before DefaultLeaseTTL = %+v, want refused", d)
	}
	c.Advance(time.Second)
	if d := admit(t, l, dflt); !d.Allowed {
		t.Errorf("Admit after DefaultLeaseTTL = %+v, want allowed", d)
	}
}

func testIndependence(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	a := ratelimit.Rule{Key: "key:a", Limit: ratelimit.RequestsPerMinute(1)}
	admit(t, l, a)
	charge(t, l, 10, ratelimit.Rule{Key: "key:a", Limit: ratelimit.TokensPerMinute(10)})
	admit(t, l, ratelimit.Rule{Key: "key:a", Limit: ratelimit.ConcurrentRequests(1)})
	if d := admit(t, l, a); d.Allowed {
		t.Fatalf("Admit over the limit = %+v, want refused", d)
	}
	for _, r := range []ratelimit.Rule{
		{Key: "key:b", Limit: ratelimit.RequestsPerMinute(1)},
		{Key: "account:a", Limit: ratelimit.RequestsPerMinute(1)},
		{Key: "key:a", Limit: ratelimit.Limit{Kind: ratelimit.Requests, Max: 1, Window: time.Hour}},
		{Key: "key:a", Limit: ratelimit.TokensPerDay(10)},
		{Key: "key:b", Limit: ratelimit.TokensPerMinute(10)},
		{Key: "key:b", Limit: ratelimit.ConcurrentRequests(1)},
	} {
		if d := admit(t, l, r); !d.Allowed {
			t.Errorf("Admit(%v) = %+v, want allowed: other subjects, kinds and windows have their own counters", r, d)
		}
	}
}

func testWindowExpiry(t *testing.T, l ratelimit.Limiter, c *Clock) {
	rpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(10)}
	tpd := ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerDay(1000)}
	for range 10 {
		admit(t, l, rpm)
	}
	charge(t, l, 1000, tpd)
	c.Advance(12 * time.Hour)
	if s := admit(t, l, tpd).Statuses[0]; s.Remaining != 500 || !within(s.Reset, 12*time.Hour) {
		t.Errorf("tokens half a window later = %+v, want 500 left, reset in 12h", s)
	}
	c.Advance(12 * time.Hour)
	d := admit(t, l, rpm, tpd)
	if !d.Allowed || d.Statuses[0].Remaining != 9 || !within(d.Statuses[0].Reset, 6*time.Second) ||
		d.Statuses[1].Remaining != 1000 || d.Statuses[1].Reset != 0 {
		t.Errorf("Admit a window later = %+v, want the requests window fresh (9 left after this one) and 1000 tokens", d)
	}
}

func testChangedMaxKeepsUsage(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	for range 4 {
		admit(t, l, ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(10)})
	}
	lowered := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(5)}
	if s := admit(t, l, lowered).Statuses[0]; !s.Allowed || s.Remaining != 0 {
		t.Errorf("Admit after lowering 10 to 5 with 4 used = %+v, want the last one admitted", s)
	}
	if d := admit(t, l, lowered); d.Allowed {
		t.Errorf("Admit past the lowered limit = %+v, want refused", d)
	}
}

// testClockBehind checks that a clock behind the last write (a skewed
// replica) never refills a counter.
func testClockBehind(t *testing.T, l ratelimit.Limiter, c *Clock) {
	rpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(10)}
	tpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerMinute(100)}
	for range 10 {
		admit(t, l, rpm)
	}
	charge(t, l, 100, tpm)
	c.Advance(-30 * time.Second)
	if d := admit(t, l, rpm, tpm); d.Allowed || d.Statuses[0].Remaining != 0 || d.Statuses[1].Remaining != 0 {
		t.Errorf("Admit with the clock 30s behind = %+v, want refused with nothing left", d)
	}
	charge(t, l, 50, tpm)
	c.Advance(30*time.Second + 6*time.Second)
	if d := admit(t, l, rpm, tpm); !d.Statuses[0].Allowed || d.Statuses[1].Remaining != 0 {
		t.Errorf("Admit 6s after the last write = %+v, want one request back and 150-10 tokens still used", d)
	}
}

func testDoneContext(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := ratelimit.Rule{Key: "key:k", Limit: ratelimit.ConcurrentRequests(1)}
	if _, err := l.Admit(ctx, []ratelimit.Rule{r}, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit(canceled) error = %v, want context.Canceled", err)
	}
	if err := l.Charge(ctx, []ratelimit.Rule{r}, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Charge(canceled) error = %v, want context.Canceled", err)
	}
	d := admit(t, l, r)
	if err := l.Release(ctx, d.Lease); !errors.Is(err, context.Canceled) {
		t.Errorf("Release(canceled) error = %v, want context.Canceled", err)
	}
	if d := admit(t, l, r); d.Allowed {
		t.Errorf("Admit after a canceled Release = %+v, want the slot still held", d)
	}
}

// testReserveZero checks that Admit without a reservation only checks that
// a token is left, as the Tokens kind always did, and that a reservation
// does not touch other kinds.
func testReserveZero(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	tpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerMinute(1000)}
	charge(t, l, 999, tpm)
	for range 3 {
		if s := admit(t, l, tpm).Statuses[0]; !s.Allowed || s.Remaining != 1 || !within(s.Reset, 59940*time.Millisecond) {
			t.Fatalf("Admit(reserve 0) with 1 token left = %+v, want allowed, still 1 left: nothing reserved", s)
		}
	}
	charge(t, l, 1, tpm)
	if d := admit(t, l, tpm); d.Allowed || d.Statuses[0].Remaining != 0 || !within(d.RetryAfter, 60*time.Millisecond) {
		t.Errorf("Admit(reserve 0) with the budget spent = %+v, want refused until one token drains (60ms)", d)
	}
	rpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(5)}
	slot := ratelimit.Rule{Key: "key:k", Limit: ratelimit.ConcurrentRequests(1)}
	d := admitReserving(t, l, 500, rpm, slot)
	if !d.Allowed || d.Statuses[0].Remaining != 4 || d.Statuses[1].Remaining != 0 {
		t.Errorf("Admit(reserve 500) on requests and concurrency rules = %+v, want one request and one slot taken", d)
	}
}

// admitConcurrently admits rules from n goroutines at once, goroutine i
// reserving reserve(i) tokens.
func admitConcurrently(t *testing.T, l ratelimit.Limiter, n int, reserve func(i int) int64, rules ...ratelimit.Rule) []ratelimit.Decision {
	t.Helper()
	decisions := make([]ratelimit.Decision, n)
	var wg sync.WaitGroup
	for i := range decisions {
		wg.Go(func() {
			d, err := l.Admit(context.Background(), rules, reserve(i))
			if err != nil || len(d.Statuses) != len(rules) {
				t.Errorf("Admit(reserve %d) = %+v, %v", reserve(i), d, err)
			}
			decisions[i] = d
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return decisions
}

// testReservationsUnderConcurrency is the over-admission the reservations
// fix: 20 requests each reserving 410 tokens at once against 1000 per
// minute. Two fit; checking for one token left would admit them all.
func testReservationsUnderConcurrency(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	tpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerMinute(1000)}
	var remaining []int64
	for _, d := range admitConcurrently(t, l, 20, func(int) int64 { return 410 }, tpm) {
		if d.Allowed {
			remaining = append(remaining, d.Statuses[0].Remaining)
			continue
		}
		// Refusals come after both admissions: 820 used, 410 more need 230
		// to drain (13.8s).
		if s := d.Statuses[0]; s.Allowed || s.Remaining != 180 || !within(d.RetryAfter, 13800*time.Millisecond) {
			t.Errorf("refusal = %+v, want 180 left and RetryAfter 13.8s", d)
		}
	}
	slices.Sort(remaining)
	if !slices.Equal(remaining, []int64{180, 590}) {
		t.Errorf("20 concurrent reservations of 410 against 1000: remaining of the admitted = %v, want [180 590]", remaining)
	}
	if s := admit(t, l, tpm).Statuses[0]; s.Remaining != 180 {
		t.Errorf("after the burst = %+v, want 180 left: refusals reserve nothing", s)
	}
}

// testReservationsNeverExceedMax admits reservations of many sizes at once
// under a requests rule and two token rules: what is reserved never exceeds
// Max, and a refusal by any rule reserves nothing anywhere.
func testReservationsNeverExceedMax(t *testing.T, l ratelimit.Limiter, _ *Clock) {
	rpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(6)}
	tpm := ratelimit.Rule{Key: "account:a", Limit: ratelimit.TokensPerMinute(1000)}
	tpd := ratelimit.Rule{Key: "account:a", Limit: ratelimit.TokensPerDay(100000)}
	size := func(i int) int64 { return int64(29*i + 7) } // 7 to 848, each under Max
	decisions := admitConcurrently(t, l, 30, size, rpm, tpm, tpd)
	var admitted, sum int64
	for i, d := range decisions {
		if d.Allowed {
			admitted++
			sum += size(i)
		}
	}
	if admitted == 0 || admitted > 6 || sum > 1000 {
		t.Fatalf("admitted %d requests reserving %d tokens in all, want 1 to 6 requests and at most 1000 tokens", admitted, sum)
	}
	for i, d := range decisions {
		if d.Allowed {
			continue
		}
		r, tok := d.Statuses[0], d.Statuses[1]
		if !d.Statuses[2].Allowed {
			t.Errorf("reservation of %d refused by the daily budget: %+v", size(i), d)
		}
		if r.Allowed && tok.Allowed {
			t.Errorf("reservation of %d refused with every rule allowing: %+v", size(i), d)
		}
		if !r.Allowed && admitted < 6 {
			t.Errorf("reservation of %d refused by the requests rule with only %d requests admitted: %+v", size(i), admitted, d)
		}
		// Tokens only get scarcer during the burst: when refused, fewer than
		// size(i) were left, but at least what is left at the end.
		if !tok.Allowed && (tok.Remaining >= size(i) || tok.Remaining < 1000-sum) {
			t.Errorf("reservation of %d refused with %d tokens left; %d are left at the end", size(i), tok.Remaining, 1000-sum)
		}
	}
	d := admit(t, l, tpm, tpd)
	if d.Statuses[0].Remaining != 1000-sum || d.Statuses[1].Remaining != 100000-sum {
		t.Errorf("after %d admissions reserving %d = %+v, want %d and %d tokens left: refusals reserve nothing",
			admitted, sum, d, 1000-sum, 100000-sum)
	}
}

// testRefundMakesRoom follows exchanges that reserve at Admit and settle
// with Charge(actual - reserved): refunds free the budget at once, never
// below empty, even from a clock behind the last write.
func testRefundMakesRoom(t *testing.T, l ratelimit.Limiter, c *Clock) {
	tpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerMinute(1000)}
	if s := admitReserving(t, l, 800, tpm).Statuses[0]; !s.Allowed || s.Remaining != 200 || !within(s.Reset, 48*time.Second) {
		t.Fatalf("Admit(reserve 800) = %+v, want allowed, 200 left, reset 48s", s)
	}
	if d := admitReserving(t, l, 300, tpm); d.Allowed || d.Statuses[0].Remaining != 200 || !within(d.RetryAfter, 6*time.Second) {
		t.Errorf("Admit(reserve 300) with 200 left = %+v, want refused until 100 drain (6s)", d)
	}
	charge(t, l, 300-800, tpm) // the first exchange used 300
	if s := admitReserving(t, l, 300, tpm).Statuses[0]; !s.Allowed || s.Remaining != 400 {
		t.Errorf("Admit(reserve 300) after refunding 500 = %+v, want allowed, 400 left", s)
	}
	charge(t, l, 500-300, tpm) // the second used 500: more than reserved
	if s := admit(t, l, tpm).Statuses[0]; s.Remaining != 200 {
		t.Errorf("after settling 300+500 = %+v, want 200 left", s)
	}

	charge(t, l, -5000, tpm) // more than is used
	if s := admit(t, l, tpm).Statuses[0]; s.Remaining != 1000 || s.Reset != 0 {
		t.Errorf("after refunding more than used = %+v, want the bucket empty", s)
	}
	if s := admitReserving(t, l, 1000, tpm).Statuses[0]; !s.Allowed || s.Remaining != 0 {
		t.Errorf("Admit(reserve 1000) on the emptied bucket = %+v, want allowed, 0 left", s)
	}
	if d := admit(t, l, tpm); d.Allowed {
		t.Errorf("Admit after reserving all = %+v, want refused: a refund leaves no credit", d)
	}

	c.Advance(-30 * time.Second)
	charge(t, l, -5000, tpm)
	if s := admitReserving(t, l, 1000, tpm).Statuses[0]; !s.Allowed || s.Remaining != 0 {
		t.Errorf("Admit(reserve 1000) after a refund from a clock 30s behind = %+v, want allowed, 0 left", s)
	}
	c.Advance(30 * time.Second)
	if d := admit(t, l, tpm); d.Allowed || d.Statuses[0].Remaining != 0 {
		t.Errorf("Admit back at the last write's time = %+v, want refused: a clock behind drains nothing", d)
	}

	untouched := ratelimit.Rule{Key: "key:other", Limit: ratelimit.TokensPerMinute(1000)}
	charge(t, l, -100, untouched)
	if s := admitReserving(t, l, 1000, untouched).Statuses[0]; !s.Allowed || s.Remaining != 0 {
		t.Errorf("Admit(reserve 1000) after refunding an unused counter = %+v, want allowed, 0 left", s)
	}
}

// testReservationCappedAtMax checks that a reservation above a rule's Max
// needs only Max free, so it passes on an idle bucket, and then consumes
// all of it.
func testReservationCappedAtMax(t *testing.T, l ratelimit.Limiter, c *Clock) {
	tpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerMinute(1000)}
	if s := admitReserving(t, l, 5000, tpm).Statuses[0]; !s.Allowed || s.Remaining != 0 || !within(s.Reset, 5*time.Minute) {
		t.Fatalf("Admit(reserve 5000) against an idle 1000 = %+v, want allowed, 0 left, reset 5m (5000 reserved)", s)
	}
	if d := admit(t, l, tpm); d.Allowed || !within(d.RetryAfter, 240060*time.Millisecond) {
		t.Errorf("Admit after reserving 5000 = %+v, want refused for 240.06s (4001 tokens)", d)
	}
	charge(t, l, 1000-5000, tpm) // it used 1000
	if d := admit(t, l, tpm); d.Allowed || !within(d.Statuses[0].Reset, time.Minute) {
		t.Errorf("Admit after settling at 1000 = %+v, want refused, reset 1m", d)
	}
	c.Advance(time.Minute)
	if s := admitReserving(t, l, 5000, tpm).Statuses[0]; !s.Allowed {
		t.Errorf("Admit(reserve 5000) once drained = %+v, want allowed", s)
	}

	// The cap is per rule: each needs min(reserve, its Max).
	tpm2 := ratelimit.Rule{Key: "key:b", Limit: ratelimit.TokensPerMinute(1000)}
	tpd := ratelimit.Rule{Key: "key:b", Limit: ratelimit.TokensPerDay(3000)}
	d := admitReserving(t, l, 2000, tpm2, tpd)
	if !d.Allowed || d.Statuses[0].Remaining != 0 || d.Statuses[1].Remaining != 1000 {
		t.Fatalf("Admit(reserve 2000) against 1000/min and 3000/day = %+v, want allowed, 0 and 1000 left", d)
	}
	c.Advance(2 * time.Minute) // the minute drains, the day barely
	d = admitReserving(t, l, 2000, tpm2, tpd)
	if d.Allowed || !d.Statuses[0].Allowed || d.Statuses[0].Remaining != 1000 || d.Statuses[1].Allowed || d.RetryAfter <= 0 {
		t.Errorf("Admit(reserve 2000) two minutes later = %+v, want refused by the day (2000 needed), the minute allowing", d)
	}
}
