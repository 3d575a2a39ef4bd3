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

// NewSpender returns a Spender with no spending. It registers its own
// cleanup.
type NewSpender func(t *testing.T) ratelimit.Spender

// RunSpender runs the suite of ratelimit.Spender. Subtests run in
// parallel, each on its own Spender.
func RunSpender(t *testing.T, newSpender NewSpender) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s ratelimit.Spender)
	}{
		{"NoBudgets", testNoBudgets},
		{"InvalidBudgets", testInvalidBudgets},
		{"RefusesOnceSpent", testRefusesOnceSpent},
		{"ZeroAllowsNothing", testZeroAllowsNothing},
		{"AllOrNothing", testAllOrNothing},
		{"ChargeSettles", testChargeSettles},
		{"Periods", testPeriods},
		{"ChangedMaxKeepsSpending", testChangedMaxKeepsSpending},
		{"Alerts", testAlerts},
		{"ConcurrentReservations", testConcurrentReservations},
		{"DoneContextSpends", testDoneContextSpends},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newSpender(t))
		})
	}
}

// nov is an instant in the middle of a month, a day and an hour.
var nov = time.Date(2030, 11, 15, 12, 30, 0, 0, time.UTC)

func monthly(key string, max int64) ratelimit.Budget {
	return ratelimit.Budget{Key: key, Max: max, Renewal: ratelimit.Monthly}
}

func reserve(t *testing.T, s ratelimit.Spender, at time.Time, amount int64, budgets ...ratelimit.Budget) ratelimit.SpendDecision {
	t.Helper()
	d, err := s.Reserve(context.Background(), budgets, at, amount)
	if err != nil {
		t.Fatalf("Reserve(%v, %d): %v", budgets, amount, err)
	}
	if len(d.Statuses) != len(budgets) {
		t.Fatalf("Reserve returned %d statuses for %d budgets", len(d.Statuses), len(budgets))
	}
	for i, st := range d.Statuses {
		if st.Budget != budgets[i] {
			t.Fatalf("status %d is for %v, want %v", i, st.Budget, budgets[i])
		}
		if _, end := budgets[i].Period(at); !st.Renews.Equal(end) {
			t.Errorf("status %d renews at %v, want %v", i, st.Renews, end)
		}
	}
	return d
}

func spend(t *testing.T, s ratelimit.Spender, at time.Time, amount int64, budgets ...ratelimit.Budget) []ratelimit.Alert {
	t.Helper()
	alerts, err := s.Charge(context.Background(), budgets, at, amount)
	if err != nil {
		t.Fatalf("Charge(%v, %d): %v", budgets, amount, err)
	}
	return alerts
}

func wantSpent(t *testing.T, s ratelimit.Spender, at time.Time, b ratelimit.Budget, want int64) {
	t.Helper()
	got, err := s.Spent(context.Background(), []ratelimit.Budget{b}, at)
	if err != nil {
		t.Fatalf("Spent(%v): %v", b, err)
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("Spent(%s at %v) = %v, want [%d]", b.Key, at, got, want)
	}
}

func testNoBudgets(t *testing.T, s ratelimit.Spender) {
	if d := reserve(t, s, nov, 5); !d.Allowed {
		t.Errorf("Reserve() = %+v, want allowed", d)
	}
	if alerts := spend(t, s, nov, 5); len(alerts) != 0 {
		t.Errorf("Charge() alerted %v", alerts)
	}
}

func testInvalidBudgets(t *testing.T, s ratelimit.Spender) {
	ok := monthly("account:a", 10)
	for name, budgets := range map[string][]ratelimit.Budget{
		"no key":          {{Max: 1, Renewal: ratelimit.Monthly}},
		"negative max":    {monthly("k", -1)},
		"max too large":   {monthly("k", ratelimit.MaxSpend+1)},
		"no renewal":      {{Key: "k", Max: 1}},
		"short window":    {{Key: "k", Max: 1, Renewal: ratelimit.Windowed, Window: time.Second}},
		"partial second":  {{Key: "k", Max: 1, Renewal: ratelimit.Windowed, Window: time.Minute + time.Millisecond}},
		"window on a day": {{Key: "k", Max: 1, Renewal: ratelimit.Daily, Window: time.Hour}},
		"shared counter":  {ok, monthly("account:a", 99)},
		"unknown renewal": {{Key: "k", Max: 1, Renewal: 9}},
	} {
		if _, err := s.Reserve(context.Background(), budgets, nov, 0); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("%s: Reserve error = %v, want ErrInvalid", name, err)
		}
		if _, err := s.Charge(context.Background(), budgets, nov, 1); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("%s: Charge error = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.Reserve(context.Background(), []ratelimit.Budget{ok}, nov, -1); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("reserving a negative amount: error = %v, want ErrInvalid", err)
	}
	if _, err := s.Charge(context.Background(), []ratelimit.Budget{ok}, nov, -ratelimit.MaxSpend-1); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("charging beyond MaxSpend: error = %v, want ErrInvalid", err)
	}
	wantSpent(t, s, nov, ok, 0)
}

func testRefusesOnceSpent(t *testing.T, s ratelimit.Spender) {
	b := monthly("account:a", 100)
	for i, want := range []struct {
		allowed bool
		spent   int64
	}{{true, 60}, {true, 120}, {false, 120}} {
		d := reserve(t, s, nov, 60, b)
		if d.Allowed != want.allowed || d.Statuses[0].Allowed != want.allowed || d.Statuses[0].Spent != want.spent {
			t.Fatalf("reservation %d: %+v, want allowed=%v spent=%d", i, d, want.allowed, want.spent)
		}
		if st, refused := d.Refused(); refused != !want.allowed || refused && st.Budget != b {
			t.Errorf("reservation %d: Refused() = %+v, %v", i, st, refused)
		}
	}
	wantSpent(t, s, nov, b, 120)
	// Settling one reservation at its real cost makes room again.
	spend(t, s, nov, 30-60, b)
	spend(t, s, nov, 10-60, b)
	wantSpent(t, s, nov, b, 40)
	if d := reserve(t, s, nov, 0, b); !d.Allowed {
		t.Errorf("with 40 of 100 spent: %+v, want allowed", d)
	}
}

func testZeroAllowsNothing(t *testing.T, s ratelimit.Spender) {
	b := ratelimit.Budget{Key: "key:k", Max: 0, Renewal: ratelimit.Daily}
	if d := reserve(t, s, nov, 0, b); d.Allowed {
		t.Errorf("a budget of zero admitted %+v", d)
	}
}

func testAllOrNothing(t *testing.T, s ratelimit.Spender) {
	key, acct := monthly("key:k", 1000), monthly("account:a", 50)
	reserve(t, s, nov, 50, acct)
	d := reserve(t, s, nov, 7, key, acct)
	if d.Allowed || !d.Statuses[0].Allowed || d.Statuses[1].Allowed {
		t.Fatalf("Reserve = %+v, want refused by the account alone", d)
	}
	if st, _ := d.Refused(); st.Budget != acct {
		t.Errorf("Refused() = %v, want the account's", st.Budget)
	}
	wantSpent(t, s, nov, key, 0)
	wantSpent(t, s, nov, acct, 50)
}

func testChargeSettles(t *testing.T, s ratelimit.Spender) {
	b := monthly("account:a", 100)
	spend(t, s, nov, 25, b)
	wantSpent(t, s, nov, b, 25)
	// A refund never takes a counter below zero.
	spend(t, s, nov, -1000, b)
	wantSpent(t, s, nov, b, 0)
	spend(t, s, nov, 3, b)
	wantSpent(t, s, nov, b, 3)
	// Charging past Max is recorded: usage is usage.
	spend(t, s, nov, 500, b)
	wantSpent(t, s, nov, b, 503)
}

func testPeriods(t *testing.T, s ratelimit.Spender) {
	day := ratelimit.Budget{Key: "account:a", Max: 10, Renewal: ratelimit.Daily}
	month := ratelimit.Budget{Key: "account:b", Max: 10, Renewal: ratelimit.Monthly}
	hour := ratelimit.Budget{Key: "account:c", Max: 10, Renewal: ratelimit.Windowed, Window: time.Hour}
	lastMinute := time.Date(2030, 11, 30, 23, 59, 0, 0, time.UTC)
	for _, b := range []ratelimit.Budget{day, month, hour} {
		spend(t, s, lastMinute, 10, b)
		if d := reserve(t, s, lastMinute, 0, b); d.Allowed {
			t.Errorf("%s: admitted with its budget spent", b.Key)
		}
		// The period renews at the boundary: midnight UTC, the first of
		// the month, the next window.
		next := time.Date(2030, 12, 1, 0, 0, 0, 0, time.UTC)
		if d := reserve(t, s, next, 4, b); !d.Allowed || d.Statuses[0].Spent != 4 {
			t.Errorf("%s: at %v: %+v, want allowed with 4 spent", b.Key, next, d)
		}
		// An exchange reserved before the boundary settles in its period.
		spend(t, s, lastMinute, -10, b)
		wantSpent(t, s, lastMinute, b, 0)
		wantSpent(t, s, next, b, 4)
	}
	// Within one period, spending is shared.
	wantSpent(t, s, time.Date(2030, 11, 30, 23, 1, 0, 0, time.UTC), hour, 0)
	wantSpent(t, s, time.Date(2030, 11, 1, 0, 0, 0, 0, time.UTC), month, 0)
	spend(t, s, time.Date(2030, 11, 1, 0, 0, 0, 0, time.UTC), 2, month)
	wantSpent(t, s, lastMinute, month, 2)
}

func testChangedMaxKeepsSpending(t *testing.T, s ratelimit.Spender) {
	spend(t, s, nov, 80, monthly("group:g", 100))
	if d := reserve(t, s, nov, 0, monthly("group:g", 80)); d.Allowed {
		t.Errorf("lowering the budget to what was spent still admitted: %+v", d)
	}
	if d := reserve(t, s, nov, 0, monthly("group:g", 81)); !d.Allowed || d.Statuses[0].Spent != 80 {
		t.Errorf("raising it: %+v, want allowed with 80 spent", d)
	}
	// Another renewal is another counter.
	wantSpent(t, s, nov, ratelimit.Budget{Key: "group:g", Max: 80, Renewal: ratelimit.Daily}, 0)
}

func testAlerts(t *testing.T, s ratelimit.Spender) {
	b := monthly("account:a", 1000)
	b.Alerts = true
	silent := monthly("account:quiet", 1000)
	check := func(amount int64, want ...int) {
		t.Helper()
		alerts := spend(t, s, nov, amount, b, silent)
		if len(alerts) != len(want) {
			t.Fatalf("Charge(%d) alerted %+v, want percents %v", amount, alerts, want)
		}
		for i, a := range alerts {
			if a.Budget != b || a.Percent != want[i] || !a.Renews.Equal(time.Date(2030, 12, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("alert %d = %+v, want %d %% of %s", i, a, want[i], b.Key)
			}
		}
	}
	check(799)
	check(1, 80)
	check(100)
	check(-500) // back under: no alert again in this period
	check(500)
	check(100, 100)
	check(1000)
	// A reservation reaching the threshold alerts at the next charge.
	dec := monthly("account:a", 1000)
	dec.Alerts = true
	next := nov.AddDate(0, 1, 0)
	if _, err := s.Reserve(context.Background(), []ratelimit.Budget{dec}, next, 2000); err != nil {
		t.Fatal(err)
	}
	alerts, err := s.Charge(context.Background(), []ratelimit.Budget{dec}, next, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 2 || alerts[0].Percent != 80 || alerts[1].Percent != 100 || alerts[1].Spent != 1999 {
		t.Errorf("next month: alerts %+v, want 80 and 100 at 1999", alerts)
	}
}

// testConcurrentReservations: 30 requests at once reserving 10 each admit
// exactly as many as the budget holds, the last one taking it past Max by
// less than its own reservation.
func testConcurrentReservations(t *testing.T, s ratelimit.Spender) {
	b := monthly("account:a", 95)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 30 {
		wg.Go(func() {
			<-start
			d, err := s.Reserve(context.Background(), []ratelimit.Budget{b}, nov, 10)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := admitted.Load(); got != 10 {
		t.Errorf("admitted %d of 30 reserving 10 against 95, want 10", got)
	}
	wantSpent(t, s, nov, b, 100)
}

func testDoneContextSpends(t *testing.T, s ratelimit.Spender) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := monthly("account:a", 10)
	if _, err := s.Reserve(ctx, []ratelimit.Budget{b}, nov, 1); err == nil {
		t.Error("Reserve on a done context succeeded")
	}
	if _, err := s.Charge(ctx, []ratelimit.Budget{b}, nov, 1); err == nil {
		t.Error("Charge on a done context succeeded")
	}
	wantSpent(t, s, nov, b, 0)
}
