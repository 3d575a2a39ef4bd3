package admin

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in throttling: after signInLimit failed sign-ins from one client
// address within signInWindow, that address may not try again until the
// window ends. The admin token is long enough that guessing it is hopeless
// anyway; this keeps a script from trying.
const (
	signInLimit  = 5
	signInWindow = 15 * time.Minute
	// maxThrottled bounds memory: past it, the oldest windows are dropped.
	maxThrottled = 10_000
)

type throttle struct {
	mu       sync.Mutex
	failures map[string]*attempts
}

// attempts are an address's failures since start.
type attempts struct {
	n     int
	start time.Time
}

func newThrottle() *throttle { return &throttle{failures: map[string]*attempts{}} }

// clientAddr is the request's client address without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// wait returns how long addr must wait before trying again, or zero.
func (t *throttle) wait(addr string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.failures[addr]
	if !ok {
		return 0
	}
	end := a.start.Add(signInWindow)
	if !now.Before(end) {
		delete(t.failures, addr)
		return 0
	}
	if a.n < signInLimit {
		return 0
	}
	return end.Sub(now)
}

// failed counts a failed sign-in from addr.
func (t *throttle) failed(addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.failures[addr]
	if !ok || !now.Before(a.start.Add(signInWindow)) {
		if len(t.failures) >= maxThrottled {
			for k, v := range t.failures {
				if !now.Before(v.start.Add(signInWindow)) {
					delete(t.failures, k)
				}
			}
			if len(t.failures) >= maxThrottled {
				clear(t.failures)
			}
		}
		a = &attempts{start: now}
		t.failures[addr] = a
	}
	a.n++
}

// succeeded forgets addr's failures.
func (t *throttle) succeeded(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.failures, addr)
}
