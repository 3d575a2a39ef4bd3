package extproc_test

import (
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/cmd/mockprovider/replay"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	redislimit "modelgate/ratelimit/redis"
	"modelgate/testdata"
)

// Two replicas (each its own server, Redis client and Envoy) share a
// 10-per-minute limit through Redis: of 30 concurrent requests spread over
// both, exactly 10 are admitted.
func TestReplicasShareLimitsThroughRedis(t *testing.T) {
	url := os.Getenv("MODELGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("MODELGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping the shared-limit test")
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	acct, _ := store.CreateAccount(ctx, "acme")
	key, _, _ := authz.CreateKey(ctx, store, acct.ID, "", nil)
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	prefix := "modelgate-test:replicas:" + rand.Text() + ":"
	var gws []*extproctest.Gateway
	for range 2 {
		opts, err := goredis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
		client := goredis.NewClient(opts)
		t.Cleanup(func() { client.Close() })
		if err := client.Ping(ctx).Err(); err != nil {
			t.Fatalf("MODELGATE_TEST_REDIS_URL is set but Redis does not answer: %v", err)
		}
		lim, err := redislimit.New(client, redislimit.Config{Prefix: prefix, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := extproc.New(extproc.Config{
			Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
				Models: []routing.Model{{ID: "gpt-4o", Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-4o"}}}}},
			Credentials: map[string]extproc.Credentials{"main": {APIKey: providerKey}},
			Limiter:     lim,
			KeyLimits:   authz.Limits{RequestsPerMinute: limit(10)},
		}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
		if err != nil {
			t.Fatal(err)
		}
		gws = append(gws, extproctest.Start(t, srv, extproctest.Config{Backends: map[string]http.Handler{"main": mock}}))
	}
	statuses := make(chan int, 30)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			statuses <- gws[i%2].Post(t, "/v1/chat/completions", key, chatBody).Status
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[200] != 10 || count[429] != 20 {
		t.Errorf("statuses = %v, want 10 × 200 and 20 × 429", count)
	}
}

// Redis stopped during a run: requests follow the configured mode, with
// no crash and no hang, and limits hold again once Redis is back.
func TestRedisOutageFailsOpenOrClosedAndRecovers(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("MODELGATE_TEST_REDIS_URL") != "" {
			t.Fatal("MODELGATE_TEST_REDIS_URL is set but redis-server is not on PATH")
		}
		t.Skip("skipping: needs redis-server on PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	start := func() *exec.Cmd {
		cmd := exec.Command(server, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
				c.Close()
				return cmd
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("redis-server did not start")
		return nil
	}
	stop := func(cmd *exec.Cmd) { cmd.Process.Kill(); cmd.Wait() }
	redis := start()
	t.Cleanup(func() { stop(redis) })

	for _, closed := range []bool{false, true} {
		client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + port, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { client.Close() })
		lim, err := redislimit.New(client, redislimit.Config{Prefix: "outage:" + rand.Text() + ":", Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
			c.Limiter = lim
			c.KeyLimits = authz.Limits{RequestsPerMinute: limit(2)}
			c.RateLimitFailClosed = closed
		})
		for range 2 {
			if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
				t.Fatalf("with Redis up: %d", res.Status)
			}
		}
		if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 429 {
			t.Fatalf("third request with Redis up: %d", res.Status)
		}
		stop(redis)
		began := time.Now()
		res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
		switch {
		case time.Since(began) > 3*time.Second:
			t.Errorf("a request with Redis down took %v", time.Since(began))
		case !closed && res.Status != 200:
			t.Errorf("fail open with Redis down: %d %s", res.Status, res.Body)
		case closed && res.Status != 503:
			t.Errorf("fail closed with Redis down: %d %s", res.Status, res.Body)
		}
		redis = start() // an empty Redis: the counts start over
		for i := range 3 {
			want := 200
			if i == 2 {
				want = 429
			}
			var res extproctest.Result
			for range 20 { // the client reconnects on its own
				if res = f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 503 || !closed {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if res.Status != want {
				t.Errorf("closed=%v: request %d after Redis came back: %d, want %d", closed, i+1, res.Status, want)
			}
		}
	}
}
