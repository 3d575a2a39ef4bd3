package admin

import (
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Wrong admin tokens are throttled per client address, on the dashboard's
// sign-in and the admin API alike: after failLimit wrong tokens from one
// address within failWindow, that address's wrong tokens are answered 429
// until the window ends.
//
// The right token is never refused. Behind a proxy or a NAT every admin
// shares one address, and a lockout that refused the right token too
// would let anyone there shut the admins out with five wrong guesses.
// What makes guessing hopeless is the token's length (at least 32
// characters, compared as SHA-256 in constant time), not the throttle:
// the throttle gives scanners a 429 to back off on and the operator a log
// line, once per address and window.
const (
	failLimit  = 5
	failWindow = 15 * time.Minute
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

// failed counts a wrong token from addr. It returns how long the
// address's wrong tokens are refused with 429, zero while it is under
// failLimit, and whether this failure is the one that reached the limit.
func (t *throttle) failed(addr string, now time.Time) (wait time.Duration, reached bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.failures[addr]
	if !ok || !now.Before(a.start.Add(failWindow)) {
		t.makeRoom(now)
		a = &attempts{start: now}
		t.failures[addr] = a
	}
	if a.n++; a.n <= failLimit {
		return 0, false
	}
	return a.start.Add(failWindow).Sub(now), a.n == failLimit+1
}

// makeRoom drops ended windows, and all of them if that is not enough.
func (t *throttle) makeRoom(now time.Time) {
	if len(t.failures) < maxThrottled {
		return
	}
	for k, v := range t.failures {
		if !now.Before(v.start.Add(failWindow)) {
			delete(t.failures, k)
		}
	}
	if len(t.failures) >= maxThrottled {
		clear(t.failures)
	}
}

// wrongToken counts a wrong admin token presented by r and returns how
// long r's address is throttled, logging the address once a window when
// it reaches the limit. No token at all is no guess, and not counted.
func (h *Handler) wrongToken(r *http.Request, token string) time.Duration {
	if token == "" {
		return 0
	}
	addr := clientAddr(r)
	wait, reached := h.throttle.failed(addr, h.cfg.Now())
	if reached {
		h.cfg.Logger.Warn("admin: too many wrong admin tokens; refusing the address's wrong tokens with 429",
			zap.String("address", addr), zap.Int("failures", failLimit+1), zap.Duration("for", wait))
	}
	return wait
}
