package admin

import (
	"container/heap"
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
	// maxThrottled bounds memory: the most addresses tracked at once.
	maxThrottled = 10_000
)

// throttle counts each address's wrong tokens in its window, for at most
// maxThrottled addresses. When that many are tracked and a new address
// fails, the least valuable entry makes room (makeRoom): the oldest
// window if it has ended (it holds nothing back: the address's next
// failure starts a new window); else the address with the fewest
// failures, the oldest window among equals. An entry is worth the wrong
// tokens it holds back: dropping an address with n failures gives it back
// at most n, and among equal counts the oldest window ends soonest, so
// dropping it shortens the least. A throttled address is dropped only
// when every address tracked is throttled, and then the one whose
// lockout ends soonest. So an attacker rotating through addresses that
// fail once each evicts only such addresses: an address guessing tokens
// stays throttled until its window ends. Both orders are kept as the
// failures come, in two heaps: a failure costs O(log maxThrottled)
// however full the table is.
type throttle struct {
	mu       sync.Mutex
	failures map[string]*attempts
	byStart  entryHeap // oldest window first
	byValue  entryHeap // least valuable first
}

// attempts are an address's failures since start.
type attempts struct {
	addr  string
	n     int
	start time.Time
	// at are its places in the throttle's heaps: byStart, byValue.
	at [2]int
}

// level is what an entry is worth: its failures, up to the one that
// throttles it (all throttled addresses are worth the same).
func (a *attempts) level() int { return min(a.n, failLimit+1) }

func newThrottle() *throttle {
	return &throttle{
		failures: map[string]*attempts{},
		byStart:  entryHeap{slot: 0, less: func(a, b *attempts) bool { return a.start.Before(b.start) }},
		byValue: entryHeap{slot: 1, less: func(a, b *attempts) bool {
			if la, lb := a.level(), b.level(); la != lb {
				return la < lb
			}
			return a.start.Before(b.start)
		}},
	}
}

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
	switch {
	case !ok:
		t.makeRoom(now)
		a = &attempts{addr: addr, start: now}
		t.failures[addr] = a
		heap.Push(&t.byStart, a)
		heap.Push(&t.byValue, a)
	case !now.Before(a.start.Add(failWindow)): // a new window
		a.n, a.start = 0, now
		heap.Fix(&t.byStart, a.at[0])
	}
	a.n++
	if a.n <= failLimit+1 { // its level changed (or its start)
		heap.Fix(&t.byValue, a.at[1])
	}
	if a.n <= failLimit {
		return 0, false
	}
	return a.start.Add(failWindow).Sub(now), a.n == failLimit+1
}

// makeRoom drops the least valuable entry when the table is full: the
// oldest window if it has ended, else the first by value.
func (t *throttle) makeRoom(now time.Time) {
	if len(t.failures) < maxThrottled {
		return
	}
	a := t.byStart.es[0]
	if now.Before(a.start.Add(failWindow)) {
		a = t.byValue.es[0]
	}
	heap.Remove(&t.byStart, a.at[0])
	heap.Remove(&t.byValue, a.at[1])
	delete(t.failures, a.addr)
}

// entryHeap is a heap (container/heap) of entries in the order of less,
// each keeping its place in it in at[slot].
type entryHeap struct {
	es   []*attempts
	less func(a, b *attempts) bool
	slot int
}

func (h *entryHeap) Len() int           { return len(h.es) }
func (h *entryHeap) Less(i, j int) bool { return h.less(h.es[i], h.es[j]) }
func (h *entryHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].at[h.slot], h.es[j].at[h.slot] = i, j
}
func (h *entryHeap) Push(x any) {
	a := x.(*attempts)
	a.at[h.slot] = len(h.es)
	h.es = append(h.es, a)
}
func (h *entryHeap) Pop() any {
	a := h.es[len(h.es)-1]
	h.es[len(h.es)-1] = nil
	h.es = h.es[:len(h.es)-1]
	return a
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
