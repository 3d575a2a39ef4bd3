package extproc_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"modelgate/authz"
	"modelgate/cmd/mockprovider/replay"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
	redislimit "modelgate/ratelimit/redis"
	"modelgate/testdata"
)

// failingSpender is a Spender whose reservations or charges fail while
// told to, as a Redis that is down fails them: nothing is done.
type failingSpender struct {
	ratelimit.Spender
	reserves, charges atomic.Bool // fail
}

var errRedisDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (s *failingSpender) Reserve(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, error) {
	if s.reserves.Load() {
		return ratelimit.SpendDecision{}, errRedisDown
	}
	return s.Spender.Reserve(ctx, bs, at, amount)
}

func (s *failingSpender) Charge(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) ([]ratelimit.Alert, error) {
	if s.charges.Load() {
		return nil, errRedisDown
	}
	return s.Spender.Charge(ctx, bs, at, amount)
}

// chatShortBody reserves one output token and gets the recorded answer of
// 377: it costs more than it reserved.
const chatShortBody = `{"model":"gpt-4o","max_tokens":1,"messages":[{"role":"user","content":"Hello!"}]}`

// accountBudget is f's account's monthly budget of 0.004 as the Spender
// counts it.
func accountBudget(f *fixture) ratelimit.Budget {
	return ratelimit.Budget{Key: "account:" + f.account.ID, Max: 4_000_000, Renewal: ratelimit.Monthly}
}

// wantCounterAtLedger checks that the account's budget counter in sp holds
// what the ledger charged the account, past the budget.
func wantCounterAtLedger(t *testing.T, f *fixture, sp ratelimit.Spender) {
	t.Helper()
	charged, err := f.store.SpentSince(context.Background(), "account:"+f.account.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := spent(t, sp, accountBudget(f)); got != int64(charged) || got <= 4_000_000 {
		t.Errorf("budget counter %d, ledger %d: want equal, past the budget", got, charged)
	}
}

// wantRefused checks that a request is refused as over budget before it
// reaches the provider.
func wantRefused(t *testing.T, gw *extproctest.Gateway, key string) {
	t.Helper()
	res := gw.Post(t, "/v1/chat/completions", key, chatBody)
	checkError(t, res, wantError{status: 429, typ: "insufficient_quota", code: "insufficient_quota"})
	if len(res.Upstream) != 0 {
		t.Error("a request over a spent budget reached the provider")
	}
}

// Charges the Spender failed to make, while it failed, are made once it
// answers again, before the next admission of their budgets: the counter
// holds what the ledger charged, and the budget of 0.004 refuses once the
// requests of 0.00379 spent it.
func TestBudgetChargesMadeOnceSpenderAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		// reserves: admissions fail too (admitted failing open, with
		// nothing reserved: the settlement charges the whole cost).
		reserves bool
		body     string
		n        int
	}{
		{"admitted failing open", true, chatBody, 2},
		{"costing more than reserved", false, chatShortBody, 2},
		// A request reserves 0.01024 and is refunded 0.00645: a refund
		// lost would refuse the account's next request, under the budget.
		{"refund", false, chatBody, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := &failingSpender{}
			f, mem := budgetFixture(t, func(c *extproc.Config) {
				sp.Spender = c.Spender
				c.Spender = sp
			})
			setAccountBudget(t, f, f.account, &authz.Budget{Amount: 4_000_000, Period: authz.PeriodMonth})
			sp.reserves.Store(tc.reserves)
			sp.charges.Store(true)
			for i := range tc.n {
				if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], tc.body); res.Status != 200 {
					t.Fatalf("request %d while the Spender fails: %d %s", i+1, res.Status, res.Body)
				}
			}
			sp.reserves.Store(false)
			sp.charges.Store(false)
			if tc.n == 1 {
				if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
					t.Fatalf("a request under the budget once the Spender answers: %d %s", res.Status, res.Body)
				}
			}
			waitRequests(t, f.store, f.account.ID, 2)
			wantRefused(t, f.gw, f.keys["limited"])
			wantCounterAtLedger(t, f, mem)
		})
	}
}

// linkedRedis returns a client of MODELGATE_TEST_REDIS_URL through link
// (skipping without it), configured as serve configures its own: no
// retries, each call bounded by its context.
func linkedRedis(t *testing.T, link *limitertest.Link) *goredis.Client {
	t.Helper()
	url := os.Getenv("MODELGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("MODELGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping tests against real Redis")
	}
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("parsing MODELGATE_TEST_REDIS_URL: %v", err)
	}
	opt.ContextTimeoutEnabled, opt.MaxRetries, opt.Dialer = true, -1, link.Dial
	// One dial a call, and room for more failed dials than the tests
	// make: past PoolSize of them, go-redis fails every call for up to a
	// second after Redis answers again.
	opt.DialerRetries, opt.PoolSize = 1, 1000
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// redisSpender is a Spender on c under a prefix of the test's own, whose
// keys are deleted when the test ends.
func redisSpender(t *testing.T, c *goredis.Client, prefix string) *redislimit.Spender {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if keys, err := c.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	sp, err := redislimit.NewSpender(c, redislimit.Config{Prefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// cuttingBackend is the mock provider, which cuts link when cut is set as
// a request reaches it: Redis goes down between a request's admission and
// its settlement.
func cuttingBackend(t *testing.T, link *limitertest.Link, cut *atomic.Bool) map[string]http.Handler {
	t.Helper()
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Load() {
			link.Cut(true)
		}
		mock.ServeHTTP(w, r)
	})
	return map[string]http.Handler{"main": h, "evil": h}
}

// Against a real Redis whose connections break: charges lost while Redis
// was down are made once it answers, before the next admission, so the
// budget's counter, which existed before (the ledger rebuilds only a
// missing one), holds what the ledger charged and the budget refuses. The
// first request (0.00379) leaves the budget of 0.004 unspent; the second
// spends it while Redis is down.
func TestBudgetChargesMadeOnceRedisAnswers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failClosed bool
	}{
		// Redis down before the second request: admitted failing open,
		// with nothing reserved; its settlement fails.
		{"fail open", false},
		// Redis goes down while the second request is at the provider:
		// admitted with a reservation of one output token and settled
		// while down; the third, meanwhile, refused with 503.
		{"fail closed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			link := &limitertest.Link{}
			c := linkedRedis(t, link)
			sp := redisSpender(t, c, "modelgate-test:extproc:"+rand.Text()+":")
			var cut atomic.Bool
			f := newFixture(t, extproctest.Config{Backends: cuttingBackend(t, link, &cut)}, func(c *extproc.Config) {
				c.Prices, c.Currency = gpt4oPrices(t), "EUR"
				c.Spender = extproc.LedgerSpender(sp, c.Responses.(extproc.BudgetLedger)) // the fixture's store
				c.RateLimitFailClosed = tc.failClosed
			})
			setAccountBudget(t, f, f.account, &authz.Budget{Amount: 4_000_000, Period: authz.PeriodMonth})
			if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
				t.Fatalf("first request: %d %s", res.Status, res.Body)
			}
			body, n := chatBody, int64(2)
			if tc.failClosed {
				cut.Store(true)
				body = chatShortBody
			} else {
				link.Cut(true)
			}
			if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body); res.Status != 200 {
				t.Fatalf("second request: %d %s", res.Status, res.Body)
			}
			if tc.failClosed {
				res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
				checkError(t, res, wantError{status: 503, typ: "server_error", code: "rate_limiter_unavailable"})
				n++
			}
			waitRequests(t, f.store, f.account.ID, n)
			cut.Store(false)
			link.Cut(false)
			wantRefused(t, f.gw, f.keys["limited"])
			wantCounterAtLedger(t, f, sp)
		})
	}
}

// A replica whose charges failed while its Redis was unreachable makes
// them in Run once it answers, without any request of its own: another
// replica, which knew nothing of them, then refuses the spent budget.
func TestBudgetChargesReachOtherReplicas(t *testing.T) {
	link := &limitertest.Link{}
	prefix := "modelgate-test:extproc:" + rand.Text() + ":"
	spA := redisSpender(t, linkedRedis(t, link), prefix)
	spB := redisSpender(t, linkedRedis(t, &limitertest.Link{}), prefix)
	f, _ := budgetFixture(t, func(c *extproc.Config) {
		c.Spender = extproc.LedgerSpender(spB, c.Responses.(extproc.BudgetLedger)) // the fixture's store
	})
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: 4_000_000, Period: authz.PeriodMonth})
	srvA, gwA := replica(t, f, spA)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srvA.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	}()
	if res := gwA.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
		t.Fatalf("first request: %d %s", res.Status, res.Body)
	}
	link.Cut(true)
	if res := gwA.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
		t.Fatalf("second request, Redis unreachable (failing open): %d %s", res.Status, res.Body)
	}
	waitRequests(t, f.store, f.account.ID, 2)
	link.Cut(false)
	charged, err := f.store.SpentSince(context.Background(), "account:"+f.account.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// Polling what replica B sees: when Run makes the charge is its
	// business; that it does is the behaviour under test.
	deadline := time.Now().Add(time.Minute)
	for spent(t, spB, accountBudget(f)) != int64(charged) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	wantCounterAtLedger(t, f, spB)
	wantRefused(t, f.gw, f.keys["limited"])
}

// When Run ends, it tries the kept charges once more and logs those it
// loses.
func TestBudgetChargesLostAtShutdownLogged(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	sp := &failingSpender{}
	f, mem := budgetFixture(t, func(c *extproc.Config) {
		sp.Spender = c.Spender
		c.Spender = sp
	})
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: 4_000_000, Period: authz.PeriodMonth})
	srv, gw := replica(t, f, sp, func(c *extproc.Config) { c.Spender, c.Logger = sp, zap.New(core) })
	sp.charges.Store(true)
	if res := gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatShortBody); res.Status != 200 {
		t.Fatalf("request: %d %s", res.Status, res.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if lines := logs.FilterMessage("budget charges lost: the budgets' store still fails").All(); len(lines) != 1 ||
		lines[0].ContextMap()["counters"] != int64(1) {
		t.Errorf("error lines %+v, want one for 1 counter", logs.All())
	}
	sp.charges.Store(false)
	srv.Run(ctx) // the last try succeeds
	if n := logs.Len(); n != 1 {
		t.Errorf("%d error lines, want 1: %+v", n, logs.All())
	}
	if got := spent(t, mem, accountBudget(f)); got != 8*2500+377*10_000 {
		t.Errorf("budget counter %d, want the request's cost %d", got, 8*2500+377*10_000)
	}
}
