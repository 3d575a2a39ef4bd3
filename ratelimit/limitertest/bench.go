package limitertest

import (
	"context"
	"testing"

	"modelgate/ratelimit"
)

// RequestRules are the limits of a typical request: key, account and group
// rates, token budgets and a concurrency cap, high enough never to refuse.
func RequestRules() []ratelimit.Rule {
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

// Benchmark measures a limiter on the path every request takes: admission
// on one rule, admission on RequestRules followed by the release of its
// lease (without, then with a token reservation settled by a refund), and
// admission on one rule from many goroutines. newLimiter
// returns an empty limiter per benchmark.
func Benchmark(b *testing.B, newLimiter func(b *testing.B) ratelimit.Limiter) {
	ctx := context.Background()
	oneRule := RequestRules()[:1]
	b.Run("one_rule", func(b *testing.B) {
		l := newLimiter(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Admit(ctx, oneRule, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("request_rules_and_release", func(b *testing.B) {
		l := newLimiter(b)
		rules := RequestRules()
		b.ReportAllocs()
		for b.Loop() {
			d, err := l.Admit(ctx, rules, 0)
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			if err := l.Release(ctx, d.Lease); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("request_rules_reserve_settle_release", func(b *testing.B) {
		l := newLimiter(b)
		rules := RequestRules()
		b.ReportAllocs()
		for b.Loop() {
			d, err := l.Admit(ctx, rules, 1000)
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			if err := l.Charge(ctx, rules, 400-1000); err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx, d.Lease); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one_rule_parallel", func(b *testing.B) {
		l := newLimiter(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Admit(ctx, oneRule, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
