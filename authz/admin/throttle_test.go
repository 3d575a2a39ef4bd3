package admin

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// An address that reached the limit stays throttled while more addresses
// than the throttle tracks each send one wrong token: rotating addresses
// does not reset the lockout of the one guessing.
func TestThrottleOutlastsRotatingAddresses(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	h, err := New(sqliteStore(t), Config{TokenSHA256: sha256.Sum256([]byte(testToken)), Models: testModels, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	wrong := func(addr string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/admin/v1/accounts", nil)
		req.RemoteAddr = addr + ":40000"
		req.Header.Set("Authorization", "Bearer wrong-token")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	const guesser = "203.0.113.9"
	for range failLimit {
		wrong(guesser)
	}
	if w := wrong(guesser); w.Code != http.StatusTooManyRequests {
		t.Fatalf("after %d wrong tokens: %d, want 429", failLimit, w.Code)
	}
	for i := range 2*maxThrottled + 1 {
		clock.Add(10 * time.Millisecond) // 200s in all, well within the window
		addr := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&0xff, i&0xff)
		if w := wrong(addr); w.Code != http.StatusUnauthorized {
			t.Fatalf("the first wrong token of %s: %d, want 401", addr, w.Code)
		}
	}
	if w := wrong(guesser); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("the throttled address after %d others failed once each: %d, Retry-After %q, want 429",
			2*maxThrottled+1, w.Code, w.Header().Get("Retry-After"))
	}
	if n := len(h.throttle.failures); n > maxThrottled {
		t.Errorf("%d addresses tracked, over %d", n, maxThrottled)
	}
}

// A full table makes room by dropping its least valuable entry: an ended
// window first, then the fewest failures, then the oldest window.
func TestThrottleEvictsTheLeastValuable(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	fail := func(th *throttle, addr string, n int, at time.Time) {
		for range n {
			th.failed(addr, at)
		}
	}
	// fill fills the table with addresses failing once each, a millisecond
	// apart after at, named fill-i from i = the addresses already there.
	fill := func(th *throttle, at time.Time) time.Time {
		for i := len(th.failures); i < maxThrottled; i++ {
			at = at.Add(time.Millisecond)
			th.failed(fmt.Sprintf("fill-%d", i), at)
		}
		return at
	}
	for _, c := range []struct {
		name      string
		setup     func(th *throttle) time.Time // returns the time of the new address's failure
		kept, out []string
	}{
		{"a throttled address outlives one-failure addresses", func(th *throttle) time.Time {
			fail(th, "guesser", failLimit+1, t0)
			return fill(th, t0)
		}, []string{"guesser", "new"}, []string{"fill-1"}},
		{"an ended window goes first, throttled or not", func(th *throttle) time.Time {
			fail(th, "ended", failLimit+1, t0)
			return fill(th, t0.Add(failWindow))
		}, []string{"fill-1", "new"}, []string{"ended"}},
		{"fewer failures go first, however young", func(th *throttle) time.Time {
			fail(th, "two", 2, t0)
			return fill(th, t0)
		}, []string{"two", "new"}, []string{"fill-1"}},
		{"when all are throttled, the lockout that ends soonest", func(th *throttle) time.Time {
			at := t0
			for i := range maxThrottled {
				at = at.Add(time.Millisecond)
				fail(th, fmt.Sprintf("throttled-%d", i), failLimit+1, at)
			}
			return at
		}, []string{"throttled-1", "new"}, []string{"throttled-0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			th := newThrottle()
			at := c.setup(th)
			th.failed("new", at)
			if n := len(th.failures); n != maxThrottled {
				t.Errorf("%d addresses tracked, want %d", n, maxThrottled)
			}
			for _, a := range c.kept {
				if _, ok := th.failures[a]; !ok {
					t.Errorf("%s was dropped", a)
				}
			}
			for _, a := range c.out {
				if _, ok := th.failures[a]; ok {
					t.Errorf("%s was kept", a)
				}
			}
		})
	}
}

// Whatever the failures, the table and both its orders hold the same
// entries, each where it says it is.
func TestThrottleOrdersAgree(t *testing.T) {
	th := newThrottle()
	r := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for range 5 * maxThrottled {
		at = at.Add(time.Duration(r.IntN(400)) * time.Millisecond)
		th.failed(fmt.Sprintf("a%d", r.IntN(maxThrottled+maxThrottled/2)), at)
	}
	if n := len(th.failures); n != maxThrottled || len(th.byStart.es) != n || len(th.byValue.es) != n {
		t.Fatalf("%d tracked, %d by start, %d by value; want %d", n, len(th.byStart.es), len(th.byValue.es), maxThrottled)
	}
	for _, h := range []*entryHeap{&th.byStart, &th.byValue} {
		for i, a := range h.es {
			if a.at[h.slot] != i || th.failures[a.addr] != a {
				t.Fatalf("heap %d: %s at %d says %d", h.slot, a.addr, i, a.at[h.slot])
			}
			if i > 0 && h.less(a, h.es[(i-1)/2]) {
				t.Fatalf("heap %d: %s before its parent", h.slot, a.addr)
			}
		}
	}
}
