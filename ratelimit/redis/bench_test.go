package redis_test

import (
	"context"
	"testing"

	"modelgate/ratelimit"
)

// requestRules are the limits of a typical request: key, account and group
// rates, token budgets and a concurrency cap, high enough never to refuse.
func requestRules() []ratelimit.Rule {
	const lots = 1 << 40
	return []ratelimit.Rule{
		{Key: "key:k1", Limit: ratelimit.RequestsPerMinute(lots)},
		{Key: "key:k1", Limit: ratelimit.ConcurrentRequests(lots)},
		{Key: "account:a1", Limit: ratelimit.RequestsPerMinute(lots)},
		{Key: "account:a1", Limit: ratelimit.TokensPerMinute(lots)},
		{Key: "account:a1", Limit: ratelimit.TokensPerDay(lots)},
		{Key: "group:g1", Limit: ratelimit.RequestsPerMinute(lots)},
	}
}

// BenchmarkAdmit measures one admission: one round trip to Redis.
func BenchmarkAdmit(b *testing.B) {
	c := testClient(b)
	l := newLimiter(b, c, testPrefix(b, c), nil)
	ctx := context.Background()
	b.Run("one_rule", func(b *testing.B) {
		rules := []ratelimit.Rule{{Key: "key:k1", Limit: ratelimit.RequestsPerMinute(1 << 40)}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Admit(ctx, rules); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("request_rules", func(b *testing.B) {
		rules := requestRules()
		b.ReportAllocs()
		for b.Loop() {
			d, err := l.Admit(ctx, rules)
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			b.StopTimer()
			if err := l.Release(ctx, d.Lease); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// BenchmarkAdmitParallel measures admissions from many goroutines sharing
// the client's pool.
func BenchmarkAdmitParallel(b *testing.B) {
	c := testClient(b)
	l := newLimiter(b, c, testPrefix(b, c), nil)
	ctx := context.Background()
	rules := requestRules()[:1]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Admit(ctx, rules); err != nil {
				b.Fatal(err)
			}
		}
	})
}
