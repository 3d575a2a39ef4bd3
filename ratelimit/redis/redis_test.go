package redis_test

import (
	"context"
	"crypto/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
	"modelgate/ratelimit/redis"
)

// testClient connects to MODELGATE_TEST_REDIS_URL. It skips when the URL is
// unset and fails when it is set but Redis does not answer.
func testClient(t testing.TB) *goredis.Client {
	t.Helper()
	url := os.Getenv("MODELGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("MODELGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping tests against real Redis")
	}
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("parsing MODELGATE_TEST_REDIS_URL: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("MODELGATE_TEST_REDIS_URL is set but Redis does not answer: %v", err)
	}
	return c
}

// testPrefix returns a key prefix of the test's own and deletes its keys
// when the test ends.
func testPrefix(t testing.TB, c *goredis.Client) string {
	t.Helper()
	prefix := "modelgate-test:ratelimit:" + rand.Text() + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, err := c.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = c.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("deleting test keys %s*: %v", prefix, err)
		}
	})
	return prefix
}

func newLimiter(t testing.TB, c *goredis.Client, prefix string, now func() time.Time) *redis.Limiter {
	t.Helper()
	l, err := redis.New(c, redis.Config{Prefix: prefix, Now: now, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func TestConformance(t *testing.T) {
	c := testClient(t)
	limitertest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Limiter {
		return newLimiter(t, c, testPrefix(t, c), now)
	})
}

func TestSpenderConformance(t *testing.T) {
	c := testClient(t)
	limitertest.RunSpender(t, func(t *testing.T) ratelimit.Spender {
		s, err := redis.NewSpender(c, redis.Config{Prefix: testPrefix(t, c), Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestSeedingConformance loses counters as a Redis flushed or restarted
// empty does: the test's keys are deleted (FLUSHDB would also delete those
// of the tests running beside it).
func TestSeedingConformance(t *testing.T) {
	c := testClient(t)
	limitertest.RunSeeding(t, func(t *testing.T) (ratelimit.Seedable, func() ratelimit.Seedable) {
		prefix := testPrefix(t, c)
		newSpender := func() ratelimit.Seedable {
			s, err := redis.NewSpender(c, redis.Config{Prefix: prefix, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return newSpender(), func() ratelimit.Seedable {
			flushPrefix(t, c, prefix)
			return newSpender()
		}
	})
}

// flushPrefix deletes every key under prefix.
func flushPrefix(t testing.TB, c *goredis.Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err == nil && len(keys) > 0 {
		err = c.Del(ctx, keys...).Err()
	}
	if err != nil {
		t.Fatalf("flushing %s*: %v", prefix, err)
	}
}

// TestReplicasShareCounters checks that two limiters on one Redis (two
// replicas) see each other's usage and leases.
func TestReplicasShareCounters(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	clock := limitertest.NewClock(limitertest.Start())
	a, b := newLimiter(t, c, prefix, clock.Now), newLimiter(t, c, prefix, clock.Now)
	ctx := context.Background()
	rpm := []ratelimit.Rule{{Key: "key:k", Limit: ratelimit.RequestsPerMinute(2)}}
	slot := []ratelimit.Rule{{Key: "key:k", Limit: ratelimit.ConcurrentRequests(1)}}
	tpm := []ratelimit.Rule{{Key: "key:k", Limit: ratelimit.TokensPerMinute(100)}}

	mustAdmit(t, a, rpm, true)
	mustAdmit(t, b, rpm, true)
	mustAdmit(t, a, rpm, false)
	held := mustAdmit(t, a, slot, true)
	mustAdmit(t, b, slot, false)
	if err := b.Release(ctx, held.Lease); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, a, slot, true)
	if err := a.Charge(ctx, tpm, 100); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, b, tpm, false)
}

func mustAdmit(t *testing.T, l ratelimit.Limiter, rules []ratelimit.Rule, allowed bool) ratelimit.Decision {
	t.Helper()
	d, err := l.Admit(context.Background(), rules, 0)
	if err != nil || d.Allowed != allowed {
		t.Fatalf("Admit(%v) = %+v, %v; want allowed %v", rules, d, err, allowed)
	}
	return d
}

// TestKeysAreNamespacedAndExpire checks that every key carries the prefix
// and a TTL no longer than the state it holds needs.
func TestKeysAreNamespacedAndExpire(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, prefix, nil)
	ctx := context.Background()
	rules := []ratelimit.Rule{
		{Key: "key:ttl", Limit: ratelimit.RequestsPerMinute(10)},
		{Key: "key:ttl", Limit: ratelimit.Limit{Kind: ratelimit.Concurrent, Max: 5, Window: 30 * time.Second}},
		{Key: "key:ttl", Limit: ratelimit.TokensPerDay(86400)},
	}
	if _, err := l.Admit(ctx, rules, 40); err != nil { // reserves 40 tokens
		t.Fatal(err)
	}
	if err := l.Charge(ctx, rules, 20); err != nil { // used 60
		t.Fatal(err)
	}
	// The longest a key may live: its drain time or lease lifetime, plus
	// the script's one-second margin.
	want := map[string]time.Duration{
		prefix + "key:ttl:r:60000":    6*time.Second + time.Second,
		prefix + "key:ttl:c":          30 * time.Second,
		prefix + "key:ttl:t:86400000": 60*time.Second + time.Second,
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(want) {
		t.Errorf("keys = %v, want %d keys", keys, len(want))
	}
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if max, ok := want[k]; !ok || ttl <= 0 || ttl > max {
			t.Errorf("key %q has TTL %v, want a known key with a TTL in (0, %v]", k, ttl, max)
		}
	}
	if stray, err := c.Keys(ctx, "key:ttl*").Result(); err != nil || len(stray) > 0 {
		t.Errorf("keys outside the prefix: %v, %v", stray, err)
	}
}

func TestNew(t *testing.T) {
	plain := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer plain.Close()
	if _, err := redis.New(plain, redis.Config{}); err == nil || !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
		t.Errorf("New(client without ContextTimeoutEnabled) error = %v, want it refused", err)
	}
	if _, err := redis.New(nil, redis.Config{}); err == nil {
		t.Error("New(nil) succeeded, want an error")
	}
	good := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer good.Close()
	if _, err := redis.New(good, redis.Config{Timeout: -time.Second}); err == nil {
		t.Error("New(negative timeout) succeeded, want an error")
	}
	if _, err := redis.New(good, redis.Config{}); err != nil {
		t.Errorf("New(good client) error = %v", err)
	}
}

// TestScriptsReloadWhenMissing checks the EVALSHA → EVAL fallback: scripts
// unknown to Redis (a restart, a failover, SCRIPT FLUSH) still run.
func TestScriptsReloadWhenMissing(t *testing.T) {
	c := testClient(t)
	l := newLimiter(t, c, testPrefix(t, c), nil)
	hashes := redis.Resalt(l, rand.Text())
	ctx := context.Background()
	if known, err := c.ScriptExists(ctx, hashes...).Result(); err != nil || slices.Contains(known, true) {
		t.Fatalf("SCRIPT EXISTS before use = %v, %v; want all unknown", known, err)
	}
	rules := []ratelimit.Rule{
		{Key: "key:k", Limit: ratelimit.ConcurrentRequests(1)},
		{Key: "key:k", Limit: ratelimit.TokensPerMinute(100)},
	}
	d := mustAdmit(t, l, rules, true)
	if err := l.Charge(ctx, rules, 10); err != nil {
		t.Fatalf("Charge: %v", err)
	}
	if err := l.Release(ctx, d.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if known, err := c.ScriptExists(ctx, hashes...).Result(); err != nil || slices.Contains(known, false) {
		t.Errorf("SCRIPT EXISTS after use = %v, %v; want all loaded by the fallback", known, err)
	}
	if d := mustAdmit(t, l, rules, true); d.Statuses[1].Remaining != 90 {
		t.Errorf("Admit after the fallback = %+v, want 90 tokens left", d)
	}
}

// TestRefundKeys checks that refunding an absent token counter creates no
// key, and that a counter a refund empties expires within a second.
func TestRefundKeys(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, prefix, nil)
	ctx := context.Background()
	tpm := []ratelimit.Rule{{Key: "key:k", Limit: ratelimit.TokensPerMinute(1000)}}
	if err := l.Charge(ctx, tpm, -100); err != nil {
		t.Fatal(err)
	}
	if keys, err := c.Keys(ctx, prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys after refunding an absent counter = %v, %v; want none", keys, err)
	}
	if d, err := l.Admit(ctx, tpm, 300); err != nil || !d.Allowed {
		t.Fatalf("Admit(reserve 300) = %+v, %v; want allowed", d, err)
	}
	if err := l.Charge(ctx, tpm, -300); err != nil {
		t.Fatal(err)
	}
	key := prefix + tpm[0].StateKey()
	if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl > time.Second {
		t.Errorf("TTL of %s after refunding the whole reservation = %v, %v; want at most a second", key, ttl, err)
	}
}
