package redis_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
	"modelgate/ratelimit/redis"
)

// TestReconcilingConformance runs the Reconciler's suite over a Redis
// Spender whose client loses its connections to Redis: charges lost while
// Redis is unreachable are made once it answers.
func TestReconcilingConformance(t *testing.T) {
	c := testClient(t) // skips without Redis
	limitertest.RunReconciling(t, func(t *testing.T) (ratelimit.Spender, func(bool)) {
		link := &limitertest.Link{}
		opt := *c.Options()
		// As serve configures its client: no retries, each call bounded
		// by its context. One dial a call, and room for more failed dials
		// than the tests make: past PoolSize of them, go-redis fails
		// every call for up to a second after Redis answers again.
		opt.MaxRetries, opt.Dialer, opt.DialerRetries, opt.PoolSize = -1, link.Dial, 1, 1000
		lc := goredis.NewClient(&opt)
		t.Cleanup(func() { lc.Close() })
		s, err := redis.NewSpender(lc, redis.Config{Prefix: testPrefix(t, c), Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s, link.Cut
	})
}
