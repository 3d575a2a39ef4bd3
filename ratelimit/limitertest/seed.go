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

// NewSeedable returns a Seedable with no spending, and restart, which
// returns a Seedable on the same store that has lost every counter: a new
// process on the memory Spender, a Redis flushed. It registers its own
// cleanup.
type NewSeedable func(t *testing.T) (s ratelimit.Seedable, restart func() ratelimit.Seedable)

// RunSeeding runs the suite of ratelimit.Seedable and ratelimit.Seeded:
// counters lost are rebuilt from the ledger before the first admission
// that needs them, once however many replicas seed at once. Subtests run
// in parallel, each on its own Seedable.
func RunSeeding(t *testing.T, newSeedable NewSeedable) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s ratelimit.Seedable, restart func() ratelimit.Seedable)
	}{
		{"SeedableIfPresent", testSeedableIfPresent},
		{"SpentStaysSpentAfterRestart", testSpentAfterRestart},
		{"NewPeriodSeeds", testNewPeriodSeeds},
		{"ChargeLeavesMissing", testChargeLeavesMissing},
		{"OnlyMissingSeeded", testOnlyMissingSeeded},
		{"ConcurrentSeedsCountOnce", testConcurrentSeeds},
		{"SeedErrorReservesNothing", testSeedError},
		{"SeededAlertsNotRepeated", testSeededAlerts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, restart := newSeedable(t)
			tt.fn(t, s, restart)
		})
	}
}

// ledger is a fake usage ledger: what each subject spent from a period's
// start, and the seeds asked of it.
type ledger struct {
	mu    sync.Mutex
	spent map[string]int64 // Key + " " + start
	calls []string
	err   error
}

func newLedger() *ledger { return &ledger{spent: map[string]int64{}} }

func ledgerKey(b ratelimit.Budget, start time.Time) string {
	return b.Key + " " + start.UTC().Format(time.RFC3339)
}

func (l *ledger) set(b ratelimit.Budget, at time.Time, n int64) {
	start, _ := b.Period(at)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spent[ledgerKey(b, start)] = n
}

func (l *ledger) seed(_ context.Context, b ratelimit.Budget, start time.Time) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	k := ledgerKey(b, start)
	l.calls = append(l.calls, k)
	return l.spent[k], nil
}

func (l *ledger) seeds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// A Seedable tells an absent counter from an empty one and sets only the
// absent.
func testSeedableIfPresent(t *testing.T, s ratelimit.Seedable, _ func() ratelimit.Seedable) {
	ctx := context.Background()
	a, b := monthly("account:a", 100), monthly("key:k", 100)
	d, missing, err := s.ReserveIfPresent(ctx, []ratelimit.Budget{a, b}, nov, 10)
	if err != nil || d.Allowed || !slices.Equal(missing, []int{0, 1}) {
		t.Fatalf("ReserveIfPresent on absent counters = %+v, %v, %v; want missing [0 1]", d, missing, err)
	}
	if alerts, err := s.ChargeIfPresent(ctx, []ratelimit.Budget{a}, nov, 10); err != nil || len(alerts) != 0 {
		t.Fatalf("ChargeIfPresent on an absent counter = %v, %v", alerts, err)
	}
	if _, missing, _ := s.ReserveIfPresent(ctx, []ratelimit.Budget{a, b}, nov, 10); !slices.Equal(missing, []int{0, 1}) {
		t.Fatalf("after ChargeIfPresent, missing = %v: want the counters still absent", missing)
	}
	if err := s.Seed(ctx, []ratelimit.Budget{a}, nov, []int64{40}); err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx, []ratelimit.Budget{a}, nov, []int64{70}); err != nil { // present: left alone
		t.Fatal(err)
	}
	wantSpent(t, s, nov, a, 40)
	if _, missing, _ := s.ReserveIfPresent(ctx, []ratelimit.Budget{a, b}, nov, 10); !slices.Equal(missing, []int{1}) {
		t.Fatalf("missing = %v, want [1]", missing)
	}
	wantSpent(t, s, nov, a, 40) // nothing reserved while one was missing
	if err := s.Seed(ctx, []ratelimit.Budget{b}, nov, []int64{0}); err != nil {
		t.Fatal(err)
	}
	d, missing, err = s.ReserveIfPresent(ctx, []ratelimit.Budget{a, b}, nov, 10)
	if err != nil || !d.Allowed || missing != nil || d.Statuses[0].Spent != 50 || d.Statuses[1].Spent != 10 {
		t.Fatalf("ReserveIfPresent on present counters = %+v, %v, %v; want allowed, 50 and 10", d, missing, err)
	}
	if _, err := s.ChargeIfPresent(ctx, []ratelimit.Budget{a}, nov, -5); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, s, nov, a, 45)
	if err := s.Seed(ctx, []ratelimit.Budget{a}, nov, []int64{1, 2}); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Seed with two amounts for one budget: %v, want ErrInvalid", err)
	}
}

// A budget spent to its limit stays spent when its counters are lost: the
// next reservation rebuilds them from the ledger and is refused. A counter
// that exists is never seeded again.
func testSpentAfterRestart(t *testing.T, s ratelimit.Seedable, restart func() ratelimit.Seedable) {
	l := newLedger()
	b := monthly("account:a", 100)
	l.set(b, nov, 40)
	sp := ratelimit.Seeded(s, l.seed)
	if d := reserve(t, sp, nov, 50, b); !d.Allowed || d.Statuses[0].Spent != 90 {
		t.Fatalf("Reserve = %+v, want allowed at 90 (40 from the ledger)", d)
	}
	if d := reserve(t, sp, nov, 5, b); !d.Allowed || d.Statuses[0].Spent != 95 {
		t.Fatalf("Reserve = %+v, want allowed at 95", d)
	}
	start, _ := b.Period(nov)
	if got := l.seeds(); !slices.Equal(got, []string{ledgerKey(b, start)}) {
		t.Errorf("seeds = %v, want one, from the month's start", got)
	}
	spend(t, sp, nov, 5, b) // settled: 100, as the ledger now says
	l.set(b, nov, 100)
	wantSpent(t, sp, nov, b, 100)

	sp = ratelimit.Seeded(restart(), l.seed)
	d := reserve(t, sp, nov.Add(time.Hour), 1, b)
	if st, refused := d.Refused(); !refused || st.Spent != 100 {
		t.Fatalf("after a restart, Reserve = %+v: want refused at 100", d)
	}
	wantSpent(t, sp, nov, b, 100)
	if got := len(l.seeds()); got != 2 {
		t.Errorf("%d seeds, want 2 (one per lost counter)", got)
	}
}

// A new period's counter is seeded from that period's start.
func testNewPeriodSeeds(t *testing.T, s ratelimit.Seedable, _ func() ratelimit.Seedable) {
	l := newLedger()
	b := ratelimit.Budget{Key: "key:k", Max: 100, Renewal: ratelimit.Daily}
	next := nov.AddDate(0, 0, 1)
	l.set(b, nov, 100)
	l.set(b, next, 30)
	sp := ratelimit.Seeded(s, l.seed)
	if d := reserve(t, sp, nov, 1, b); d.Allowed {
		t.Fatalf("Reserve = %+v, want refused", d)
	}
	if d := reserve(t, sp, next, 1, b); !d.Allowed || d.Statuses[0].Spent != 31 {
		t.Fatalf("the next day, Reserve = %+v, want allowed at 31", d)
	}
	startNext, _ := b.Period(next)
	if got := l.seeds(); len(got) != 2 || got[1] != ledgerKey(b, startNext) {
		t.Errorf("seeds = %v, want the next day's start last", got)
	}
}

// A charge on a lost counter leaves it lost: the ledger holds that charge,
// and the next reservation rebuilds the counter from it, counting it once.
func testChargeLeavesMissing(t *testing.T, s ratelimit.Seedable, _ func() ratelimit.Seedable) {
	l := newLedger()
	b := monthly("group:g", 100)
	b.Alerts = true
	sp := ratelimit.Seeded(s, l.seed)
	if alerts := spend(t, sp, nov, 90, b); len(alerts) != 0 {
		t.Errorf("Charge on a lost counter alerted %v", alerts)
	}
	l.set(b, nov, 90) // the ledger recorded that exchange
	if d := reserve(t, sp, nov, 5, b); !d.Allowed || d.Statuses[0].Spent != 95 {
		t.Fatalf("Reserve = %+v, want allowed at 95 (counted once)", d)
	}
}

// Of several budgets, only the lost counters are seeded, and the
// reservation counts once on each.
func testOnlyMissingSeeded(t *testing.T, s ratelimit.Seedable, _ func() ratelimit.Seedable) {
	l := newLedger()
	k, a := monthly("key:k", 100), monthly("account:a", 100)
	l.set(k, nov, 50)
	l.set(a, nov, 70)
	sp := ratelimit.Seeded(s, l.seed)
	if d := reserve(t, sp, nov, 10, k); !d.Allowed || d.Statuses[0].Spent != 60 {
		t.Fatalf("Reserve = %+v", d)
	}
	d := reserve(t, sp, nov, 10, k, a)
	if !d.Allowed || d.Statuses[0].Spent != 70 || d.Statuses[1].Spent != 80 {
		t.Fatalf("Reserve = %+v, want allowed at 70 and 80", d)
	}
	if got := len(l.seeds()); got != 2 {
		t.Errorf("%d seeds, want 2", got)
	}
}

// Replicas that find a counter missing at once seed it once: every
// reservation counts on top of the ledger's spending, once.
func testConcurrentSeeds(t *testing.T, s ratelimit.Seedable, _ func() ratelimit.Seedable) {
	l := newLedger()
	b := monthly("account:busy", 1_000_000)
	l.set(b, nov, 1000)
	replicas := []ratelimit.Spender{ratelimit.Seeded(s, l.seed), ratelimit.Seeded(s, l.seed)}
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			d, err := replicas[i%2].Reserve(context.Background(), []ratelimit.Budget{b}, nov, 10)
			if err == nil && !d.Allowed {
				err = errors.New("refused")
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantSpent(t, s, nov, b, 1000+n*10)
}

// A ledger that fails fails the reservation, which reserves nothing.
func testSeedError(t *testing.T, s ratelimit.Seedable, _ func() ratelimit.Seedable) {
	l := newLedger()
	b := monthly("account:a", 100)
	l.set(b, nov, 20)
	l.err = errors.New("ledger down")
	sp := ratelimit.Seeded(s, l.seed)
	if _, err := sp.Reserve(context.Background(), []ratelimit.Budget{b}, nov, 10); !errors.Is(err, l.err) {
		t.Fatalf("Reserve error = %v, want the ledger's", err)
	}
	if _, err := sp.Spent(context.Background(), []ratelimit.Budget{b}, nov); !errors.Is(err, l.err) {
		t.Fatalf("Spent error = %v, want the ledger's", err)
	}
	l.mu.Lock()
	l.err = nil
	l.mu.Unlock()
	if d := reserve(t, sp, nov, 10, b); !d.Allowed || d.Statuses[0].Spent != 30 {
		t.Fatalf("Reserve = %+v, want allowed at 30", d)
	}
}

// Alerts a rebuilt counter had already reached are not given again.
func testSeededAlerts(t *testing.T, s ratelimit.Seedable, _ func() ratelimit.Seedable) {
	l := newLedger()
	b := monthly("account:a", 100)
	b.Alerts = true
	l.set(b, nov, 85)
	sp := ratelimit.Seeded(s, l.seed)
	reserve(t, sp, nov, 0, b)
	if alerts := spend(t, sp, nov, 5, b); len(alerts) != 0 {
		t.Errorf("Charge to 90 alerted %v: the 80 %% alert was given before the counter was lost", alerts)
	}
	if alerts := spend(t, sp, nov, 10, b); len(alerts) != 1 || alerts[0].Percent != 100 {
		t.Errorf("Charge to 100 alerted %v, want 100 %%", alerts)
	}
}
