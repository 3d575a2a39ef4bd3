package memory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
)

// TestStateIsBounded checks that drained buckets and expired leases are
// dropped, so memory follows live subjects, not every subject ever seen.
func TestStateIsBounded(t *testing.T) {
	c := limitertest.NewClock(limitertest.Start())
	l := New(Config{Now: c.Now})
	ctx := context.Background()
	const subjects = 3000
	for i := range subjects {
		key := "key:" + strconv.Itoa(i)
		rules := []ratelimit.Rule{
			{Key: key, Limit: ratelimit.RequestsPerMinute(10)},
			{Key: key, Limit: ratelimit.ConcurrentRequests(10)}, // never released
		}
		if _, err := l.Admit(ctx, rules, 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Charge(ctx, []ratelimit.Rule{{Key: key, Limit: ratelimit.TokensPerDay(1000)}}, 100); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.size(); got < 2*subjects {
		t.Fatalf("size after %d subjects = %d, want at least %d live counters", subjects, got, 2*subjects)
	}
	c.Advance(ratelimit.DefaultLeaseTTL)
	if got := l.size(); got < subjects {
		t.Fatalf("size before tokens drain = %d, want the %d token buckets kept", got, subjects)
	}
	c.Advance(24 * time.Hour)
	live := []ratelimit.Rule{{Key: "key:live", Limit: ratelimit.RequestsPerMinute(1 << 40)}}
	for range sweepMin + 3*subjects {
		if _, err := l.Admit(ctx, live, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.size(); got != 1 {
		t.Errorf("size after everything drained = %d, want 1 (the live key)", got)
	}
}

// size counts the counters held.
func (l *Limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets) + len(l.slots)
}
