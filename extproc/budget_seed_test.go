package extproc_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/cmd/mockprovider/replay"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
	redislimit "modelgate/ratelimit/redis"
	"modelgate/testdata"
)

// spendAccountBudget spends f's account's monthly budget of 0.004 (two
// requests), checks the third is refused, and waits for the ledger to hold
// all three.
func spendAccountBudget(t *testing.T, f *fixture) {
	t.Helper()
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: 4_000_000, Period: authz.PeriodMonth})
	stream := `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}],"stream":true}`
	for i, body := range []string{chatBody, stream} {
		if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body); res.Status != 200 {
			t.Fatalf("request %d: %d %s", i+1, res.Status, res.Body)
		}
	}
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["limited"], chatBody)
	checkError(t, res, wantError{status: 429, typ: "insufficient_quota", code: "insufficient_quota"})
	waitRequests(t, f.store, f.account.ID, 3)
}

// restartGateway starts another gateway on f's store (a restart, or
// another replica) with sp counting budgets.
func restartGateway(t *testing.T, f *fixture, sp ratelimit.Spender) *extproctest.Gateway {
	t.Helper()
	_, gw := replica(t, f, sp)
	return gw
}

// replica is restartGateway's server and gateway, sp (rebuilt from the
// ledger) counting budgets.
func replica(t *testing.T, f *fixture, sp ratelimit.Spender, opts ...func(*extproc.Config)) (*extproc.Server, *extproctest.Gateway) {
	t.Helper()
	prices, err := pricing.NewTable([]pricing.Price{
		{Model: "gpt-4o", Input: 2_500_000_000, Output: 10 * pricing.NanosPerUnit},
	})
	if err != nil {
		t.Fatal(err)
	}
	ecfg := extproc.Config{
		MaxRequestBodyBytes: 64 << 10,
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
			Models: []routing.Model{{ID: "gpt-4o", OwnedBy: "openai",
				Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-5-nano"}}}}},
		Credentials: map[string]extproc.Credentials{"main": {APIKey: providerKey}},
		Prices:      prices, Spender: extproc.LedgerSpender(sp, f.store), Currency: "EUR",
	}
	for _, o := range opts {
		o(&ecfg)
	}
	srv, err := extproc.New(ecfg, authz.NewAuthenticator(f.store, authz.AuthenticatorConfig{}), f.store)
	if err != nil {
		t.Fatal(err)
	}
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	return srv, extproctest.Start(t, srv, extproctest.Config{Backends: map[string]http.Handler{"main": mock}, BufferLimitBytes: 1 << 20})
}

// wantSpentAgain checks that a budget spent before its counters were lost
// still refuses: 429 insufficient_quota, nothing sent to the provider, and
// the rebuilt counter holds what the ledger charged.
func wantSpentAgain(t *testing.T, f *fixture, gw *extproctest.Gateway, sp ratelimit.Spender) {
	t.Helper()
	res := gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
	checkError(t, res, wantError{status: 429, typ: "insufficient_quota", code: "insufficient_quota"})
	if len(res.Upstream) != 0 {
		t.Error("a request over a spent budget reached the provider after its counter was lost")
	}
	charged, err := f.store.SpentSince(context.Background(), "account:"+f.account.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	b := ratelimit.Budget{Key: "account:" + f.account.ID, Max: 4_000_000, Renewal: ratelimit.Monthly}
	if got := spent(t, sp, b); got != int64(charged) || got <= 4_000_000 {
		t.Errorf("rebuilt counter %d, ledger %d: want equal, past the budget", got, charged)
	}
}

// A budget spent to its limit stays spent across a restart of a gateway
// counting budgets in memory: the new process rebuilds the counter from
// the ledger before its first admission.
func TestBudgetSurvivesRestart(t *testing.T) {
	f, _ := budgetFixture(t)
	spendAccountBudget(t, f)
	sp := memory.NewSpender() // the new process's
	wantSpentAgain(t, f, restartGateway(t, f, sp), sp)
}

// redisFlushDB is the Redis database TestBudgetSurvivesRedisFlush empties.
const redisFlushDB = 15

// A budget spent to its limit stays spent across a Redis that comes back
// empty: the counter is rebuilt from the ledger.
func TestBudgetSurvivesRedisFlush(t *testing.T) {
	url := os.Getenv("MODELGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("MODELGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping tests against real Redis")
	}
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("parsing MODELGATE_TEST_REDIS_URL: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	// A database of its own, which no other test uses, emptied with
	// FLUSHDB as a Redis that restarted without persistence comes back.
	opt.DB = redisFlushDB
	if db, err := goredis.ParseURL(url); err == nil && db.DB == redisFlushDB {
		t.Fatalf("MODELGATE_TEST_REDIS_URL uses database %d, which this test flushes", redisFlushDB)
	}
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	prefix := "modelgate-test:extproc:" + rand.Text() + ":"
	flush := func() {
		if err := c.FlushDB(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
	}
	t.Cleanup(flush)
	sp, err := redislimit.NewSpender(c, redislimit.Config{Prefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := budgetFixture(t, func(c *extproc.Config) {
		c.Spender = extproc.LedgerSpender(sp, c.Responses.(extproc.BudgetLedger)) // the fixture's store
	})
	spendAccountBudget(t, f)
	if n, err := c.Keys(context.Background(), prefix+"*").Result(); err != nil || len(n) == 0 {
		t.Fatalf("no budget counters in Redis under %s (%v)", prefix, err)
	}
	flush()
	wantSpentAgain(t, f, f.gw, sp) // the same gateway, its Redis emptied
	flush()
	wantSpentAgain(t, f, restartGateway(t, f, sp), sp) // and a replica after another flush
}
