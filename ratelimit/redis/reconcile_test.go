package redis_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
	"modelgate/ratelimit/redis"
)

// redisLink is the way to a real Redis, which a test cuts as an outage
// does: while cut, every connection is closed and none is made, so every
// call fails at once, deterministically.
type redisLink struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

var errLinkCut = errors.New("dial tcp: connect: connection refused (link cut by the test)")

func (l *redisLink) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return nil, errLinkCut
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		l.conns = append(l.conns, c)
	}
	return c, err
}

func (l *redisLink) set(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for _, c := range l.conns {
			c.Close()
		}
		l.conns = nil
	}
}

// TestReconcilingConformance runs the Reconciler's suite over a Redis
// Spender whose client loses its connections to Redis: charges lost while
// Redis is unreachable are made once it answers.
func TestReconcilingConformance(t *testing.T) {
	c := testClient(t) // skips without Redis
	limitertest.RunReconciling(t, func(t *testing.T) (ratelimit.Spender, func(bool)) {
		link := &redisLink{}
		opt := *c.Options()
		// As serve configures its client: no retries, each call bounded
		// by its context. One dial a call, and room for more failed dials
		// than the tests make: past PoolSize of them, go-redis fails
		// every call for up to a second after Redis answers again.
		opt.MaxRetries, opt.Dialer, opt.DialerRetries, opt.PoolSize = -1, link.dial, 1, 1000
		lc := goredis.NewClient(&opt)
		t.Cleanup(func() { lc.Close() })
		s, err := redis.NewSpender(lc, redis.Config{Prefix: testPrefix(t, c), Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s, link.set
	})
}
