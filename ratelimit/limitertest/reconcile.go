package limitertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/ratelimit"
)

// NewBreakable returns a Spender with no spending, and fail, which makes
// every call to it fail (fail(true)), as when its store is down, doing
// nothing, or answer again (fail(false)). It registers its own cleanup.
type NewBreakable func(t *testing.T) (s ratelimit.Spender, fail func(bool))

// RunReconciling runs the suite of ratelimit.Reconciler over a Spender
// whose store fails: the charges it failed to make are made once it
// answers again, before the next admission of their budgets, once only,
// so that the counters hold what was spent. Subtests run in parallel, each
// on its own Spender.
func RunReconciling(t *testing.T, newBreakable NewBreakable) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s ratelimit.Spender, fail func(bool))
	}{
		{"ChargesMadeBeforeAdmission", testChargesMadeBeforeAdmission},
		{"FailedReserveChargedInFull", testFailedReserveChargedInFull},
		{"RefundsMade", testRefundsMade},
		{"ReserveFailsWhileChargesFail", testReserveFailsWhileChargesFail},
		{"MadeOnceUnderConcurrency", testMadeOnceUnderConcurrency},
		{"RunMakesThem", testRunMakesThem},
		{"Bounded", testBounded},
		{"LateAlerts", testLateAlerts},
		{"NotKept", testNotKept},
		{"PeriodsOverDropped", testPeriodsOverDropped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, fail := newBreakable(t)
			tt.fn(t, s, fail)
		})
	}
}

// Failing is a Spender whose calls fail while Fail is set, as a store that
// is down fails them: doing nothing.
type Failing struct {
	ratelimit.Spender
	Fail atomic.Bool
}

// ErrDown is the error of Failing's calls.
var ErrDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// Reserve implements ratelimit.Spender.
func (f *Failing) Reserve(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, error) {
	if f.Fail.Load() {
		return ratelimit.SpendDecision{}, ErrDown
	}
	return f.Spender.Reserve(ctx, bs, at, amount)
}

// Charge implements ratelimit.Spender.
func (f *Failing) Charge(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	if f.Fail.Load() {
		return nil, ErrDown
	}
	return f.Spender.Charge(ctx, bs, at, amount)
}

// Spent implements ratelimit.Spender.
func (f *Failing) Spent(ctx context.Context, bs []ratelimit.Budget, at time.Time) ([]int64, error) {
	if f.Fail.Load() {
		return nil, ErrDown
	}
	return f.Spender.Spent(ctx, bs, at)
}

func newReconciler(t *testing.T, s ratelimit.Spender, cfg ratelimit.ReconcilerConfig) *ratelimit.Reconciler {
	t.Helper()
	r, err := ratelimit.NewReconciler(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// chargeFails charges r while its store fails and checks the charge was
// kept.
func chargeFails(t *testing.T, r *ratelimit.Reconciler, amount int64, budgets ...ratelimit.Budget) {
	t.Helper()
	if _, err := r.Charge(context.Background(), budgets, nov, amount); !errors.Is(err, ratelimit.ErrChargeKept) {
		t.Fatalf("Charge(%d) while the store fails: %v, want ErrChargeKept", amount, err)
	}
}

// Charges that failed count before the next admission of their budget,
// which the subject had spent meanwhile: it is refused.
func testChargesMadeBeforeAdmission(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{})
	a, k := monthly("account:a", 100), monthly("key:k", 1000)
	if d := reserve(t, r, nov, 40, a, k); !d.Allowed {
		t.Fatalf("Reserve = %+v, want allowed", d)
	}
	fail(true)
	chargeFails(t, r, 30, a, k)
	chargeFails(t, r, 40, a, k)
	if got := r.Pending(); got != 2 {
		t.Errorf("Pending() = %d, want 2 counters", got)
	}
	fail(false)
	d := reserve(t, r, nov, 1, a, k)
	if st, refused := d.Refused(); !refused || st.Budget != a || st.Spent != 110 {
		t.Fatalf("Reserve once the store answers = %+v: want refused by %s at 110", d, a.Key)
	}
	wantSpent(t, s, nov, a, 110)
	wantSpent(t, s, nov, k, 110)
	if got := r.Pending(); got != 0 {
		t.Errorf("Pending() = %d after the charges were made", got)
	}
}

// A Reserve that failed (admitted failing open, with nothing reserved) is
// settled by a charge of the whole cost, which counts once the store
// answers.
func testFailedReserveChargedInFull(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{})
	b := monthly("account:a", 100)
	fail(true)
	if _, err := r.Reserve(context.Background(), []ratelimit.Budget{b}, nov, 60); err == nil {
		t.Fatal("Reserve succeeded while the store fails")
	}
	chargeFails(t, r, 60, b)
	fail(false)
	if d := reserve(t, r, nov, 50, b); !d.Allowed || d.Statuses[0].Spent != 110 {
		t.Fatalf("Reserve = %+v, want allowed at 110 (60 charged first)", d)
	}
	if d := reserve(t, r, nov, 1, b); d.Allowed {
		t.Fatalf("Reserve = %+v, want refused", d)
	}
}

// A refund that failed is made too: the subject is not refused for what it
// did not spend.
func testRefundsMade(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{})
	b := monthly("account:a", 100)
	reserve(t, r, nov, 80, b)
	fail(true)
	chargeFails(t, r, -50, b)
	fail(false)
	if d := reserve(t, r, nov, 10, b); !d.Allowed || d.Statuses[0].Spent != 40 {
		t.Fatalf("Reserve = %+v, want allowed at 40 (refunded 50 first)", d)
	}
}

// While the store fails, a Reserve whose budgets have charges waiting
// fails (the caller fails open or closed) and reserves nothing; then the
// charges count once.
func testReserveFailsWhileChargesFail(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{})
	b := monthly("account:a", 100)
	fail(true)
	chargeFails(t, r, 50, b)
	for range 2 {
		if _, err := r.Reserve(context.Background(), []ratelimit.Budget{b}, nov, 5); err == nil {
			t.Fatal("Reserve succeeded while the store fails")
		}
		if _, err := r.Spent(context.Background(), []ratelimit.Budget{b}, nov); err == nil {
			t.Fatal("Spent succeeded while the store fails")
		}
	}
	fail(false)
	wantSpent(t, r, nov, b, 50)
	wantSpent(t, s, nov, b, 50)
}

// Concurrent admissions that find the same charges waiting make them
// once.
func testMadeOnceUnderConcurrency(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{})
	b := monthly("account:a", 1_000_000)
	fail(true)
	chargeFails(t, r, 500, b)
	chargeFails(t, r, 300, b)
	fail(false)
	const n = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			d, err := r.Reserve(context.Background(), []ratelimit.Budget{b}, nov, 1)
			if err != nil || !d.Allowed {
				t.Errorf("Reserve = %+v, %v", d, err)
			}
		})
	}
	close(start)
	wg.Wait()
	wantSpent(t, s, nov, b, 800+n)
}

// Run makes the waiting charges once the store answers, without any call
// on the Reconciler: another replica, which knows nothing of them, sees
// them.
func testRunMakesThem(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{})
	b := monthly("account:a", 100)
	reserve(t, r, nov, 40, b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	fail(true)
	chargeFails(t, r, 70, b)
	fail(false)
	// Polling what another replica sees: when Run makes the charge is its
	// business; that it does is the behaviour under test.
	deadline := time.Now().Add(time.Minute)
	for r.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r.Pending() > 0 {
		t.Fatal("Run did not make the kept charge within a minute of the store answering")
	}
	wantSpent(t, s, nov, b, 110)
	if d := reserve(t, s, nov, 1, b); d.Allowed {
		t.Errorf("another replica's Reserve = %+v, want refused", d)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

// Beyond MaxPending counters, a failed charge is lost and counted; the
// counters kept still take more.
func testBounded(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{MaxPending: 1})
	a, k := monthly("account:a", 100), monthly("key:k", 100)
	fail(true)
	chargeFails(t, r, 10, a)
	if _, err := r.Charge(context.Background(), []ratelimit.Budget{a, k}, nov, 20); !errors.Is(err, ratelimit.ErrChargeLost) {
		t.Fatalf("Charge beyond MaxPending: %v, want ErrChargeLost", err)
	}
	if r.Pending() != 1 || r.Lost() != 1 {
		t.Errorf("Pending() = %d, Lost() = %d; want 1 and 1", r.Pending(), r.Lost())
	}
	fail(false)
	if err := r.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, s, nov, a, 30)
	wantSpent(t, s, nov, k, 0)
}

// The alerts a charge made late reaches go to Alerted: its caller got an
// error.
func testLateAlerts(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	var mu sync.Mutex
	var got []ratelimit.Alert
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{Alerted: func(as []ratelimit.Alert) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, as...)
	}})
	b := monthly("account:a", 100)
	b.Alerts = true
	reserve(t, r, nov, 70, b)
	fail(true)
	chargeFails(t, r, 20, b)
	fail(false)
	if err := r.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Percent != 80 || got[0].Spent != 90 || got[0].Budget != b {
		t.Errorf("Alerted %+v, want 80 %% of %s at 90", got, b.Key)
	}
}

// Charges that never could be made, or that their caller gave up, are not
// kept.
func testNotKept(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{})
	b := monthly("account:a", 100)
	fail(true)
	if _, err := r.Charge(context.Background(), []ratelimit.Budget{{Key: "k", Max: -1, Renewal: ratelimit.Monthly}}, nov, 5); err == nil || errors.Is(err, ratelimit.ErrChargeKept) {
		t.Errorf("Charge of an invalid budget: %v, want an error, not kept", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Charge(ctx, []ratelimit.Budget{b}, nov, 5); err == nil || errors.Is(err, ratelimit.ErrChargeKept) {
		t.Errorf("Charge on a done context: %v, want an error, not kept", err)
	}
	if got := r.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want 0", got)
	}
	fail(false)
	wantSpent(t, r, nov, b, 0)
}

// The charges of a period whose counter is gone (SpendGrace after its end)
// are dropped, not made.
func testPeriodsOverDropped(t *testing.T, s ratelimit.Spender, fail func(bool)) {
	var now atomic.Int64
	now.Store(nov.UnixNano())
	r := newReconciler(t, s, ratelimit.ReconcilerConfig{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	b := ratelimit.Budget{Key: "account:a", Max: 100, Renewal: ratelimit.Daily}
	fail(true)
	chargeFails(t, r, 30, b)
	_, end := b.Period(nov)
	now.Store(end.Add(ratelimit.SpendGrace + time.Second).UnixNano())
	fail(false)
	if err := r.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want the period's charge dropped", got)
	}
	wantSpent(t, s, nov, b, 0)
}
