package redis_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/ratelimit"
	"modelgate/ratelimit/redis"
)

// TestUnreachable checks that every call fails within the timeout, neither
// hanging nor panicking, whether nothing listens (a closed port) or a peer
// accepts and never answers (a stalled Redis). No Redis needed.
func TestUnreachable(t *testing.T) {
	for name, addr := range map[string]string{
		"closed port": closedPort(t),
		"no answer":   silentPeer(t),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() })
			const timeout = 200 * time.Millisecond
			l, err := redis.New(c, redis.Config{Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			rules := []ratelimit.Rule{
				{Key: "key:k", Limit: ratelimit.RequestsPerMinute(10)},
				{Key: "key:k", Limit: ratelimit.TokensPerMinute(10)},
				{Key: "key:k", Limit: ratelimit.ConcurrentRequests(10)},
			}
			lease := ratelimit.Lease{ID: "x", Rules: rules[2:]}
			for call, fn := range map[string]func() error{
				"Admit":   func() error { _, err := l.Admit(ctx, rules, 0); return err },
				"Charge":  func() error { return l.Charge(ctx, rules, 5) },
				"Release": func() error { return l.Release(ctx, lease) },
			} {
				start := time.Now()
				err := fn()
				if took := time.Since(start); err == nil || took > timeout+time.Second {
					t.Errorf("%s against %s = %v after %v, want an error within %v", call, name, err, took, timeout)
				}
			}
		})
	}
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// silentPeer returns the address of a server that accepts connections and
// never writes a byte.
func silentPeer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
