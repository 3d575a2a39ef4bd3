package extproc_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
	"modelgate/translate/anthropic"
)

func limit(n int64) *int64 { return &n }

// With 5 requests per minute per key, the sixth is a 429 with OpenAI's
// body and headers and a Retry-After that lets it in.
func TestRequestRateLimit(t *testing.T) {
	var now atomic.Int64 // the limiter reads it after each reply
	now.Store(time.Unix(1_900_000_000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Limiter = memory.New(memory.Config{Now: clock})
		c.KeyLimits = authz.Limits{RequestsPerMinute: limit(5)}
	})
	for i := range 5 {
		res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
		if res.Status != 200 {
			t.Fatalf("request %d: %d %s", i+1, res.Status, res.Body)
		}
		if got := res.Header.Get("X-Ratelimit-Remaining-Requests"); got != strconv.Itoa(4-i) || res.Header.Get("X-Ratelimit-Limit-Requests") != "5" {
			t.Errorf("request %d: remaining %q, limit %q", i+1, got, res.Header.Get("X-Ratelimit-Limit-Requests"))
		}
	}
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
	checkError(t, res, wantError{status: 429, typ: "rate_limit_error", code: "rate_limit_exceeded"})
	if res.Header.Get("Retry-After") != "12" || res.Header.Get("X-Ratelimit-Remaining-Requests") != "0" || res.Header.Get("X-Ratelimit-Reset-Requests") != "1m0s" {
		t.Errorf("429 headers = %v", res.Header)
	}
	if len(res.Upstream) != 0 {
		t.Error("a refused request reached the provider")
	}
	// Another key of the same account has its own budget.
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["limited"], chatBody); res.Status != 200 {
		t.Errorf("another key: %d", res.Status)
	}
	now.Add(int64(12 * time.Second))
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
		t.Errorf("after Retry-After: %d %s", res.Status, res.Body)
	}
}

// Token limits reserve a request's prompt and max_tokens at admission and
// charge the usage the provider reported after the fact: the request whose
// answer goes over is served, the next one is refused.
func TestTokenRateLimitChargesRealUsage(t *testing.T) {
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Limiter = memory.New(memory.Config{})
		c.AccountLimits = authz.Limits{TokensPerMinute: limit(450)}
	})
	// A JSON answer of 385 tokens, then a stream of 112: both charge what the
	// provider reported. Each reserves about 30 tokens (prompt and
	// max_tokens): the second fits beside the first's 385.
	jsonBody := `{"model":"gpt-4o","max_tokens":1,"messages":[{"role":"user","content":"Hello!"}]}`
	streamBody := `{"model":"gpt-4o","max_tokens":1,"messages":[{"role":"user","content":"Hello!"}],"stream":true}`
	for i, body := range []string{jsonBody, streamBody} {
		if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body); res.Status != 200 {
			t.Fatalf("request %d: %d %s", i+1, res.Status, res.Body)
		}
		waitRequests(t, f.store, f.account.ID, int64(i+1))
	}
	totals, _ := f.store.UsageSince(context.Background(), f.account.ID, time.Time{})
	if totals.TotalTokens <= 450 || totals.TotalTokens == 385 {
		t.Fatalf("the two requests used %d tokens; the test needs the stream's usage to go over 450", totals.TotalTokens)
	}
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["limited"], jsonBody) // same account
	checkError(t, res, wantError{status: 429, typ: "rate_limit_error", code: "rate_limit_exceeded"})
	if !strings.Contains(string(res.Body), "tokens per min (TPM)") || res.Header.Get("X-Ratelimit-Limit-Tokens") != "450" {
		t.Errorf("429 = %v %s", res.Header, res.Body)
	}
}

func waitRequests(t *testing.T, store *sqlite.Store, account string, n int64) {
	t.Helper()
	for range 200 {
		if totals, _ := store.UsageSince(context.Background(), account, time.Time{}); totals.Requests >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("fewer than %d usage records", n)
}

// countingLimiter wraps a limiter and records charges and releases.
type countingLimiter struct {
	ratelimit.Limiter
	charged  chan int64
	released chan struct{}
	fail     bool
	reserved atomic.Int64 // by the last admission
}

func (c *countingLimiter) Admit(ctx context.Context, rules []ratelimit.Rule, reserve int64) (ratelimit.Decision, error) {
	if c.fail {
		return ratelimit.Decision{}, errors.New("redis: connection refused")
	}
	c.reserved.Store(reserve)
	return c.Limiter.Admit(ctx, rules, reserve)
}

func (c *countingLimiter) Charge(ctx context.Context, rules []ratelimit.Rule, tokens int64) error {
	c.charged <- tokens
	return c.Limiter.Charge(ctx, rules, tokens)
}

func (c *countingLimiter) Release(ctx context.Context, l ratelimit.Lease) error {
	if len(l.Rules) > 0 {
		c.released <- struct{}{}
	}
	return c.Limiter.Release(ctx, l)
}

// A stream the client cancels is charged what the provider reported so
// far (its reservation reconciled), and its concurrency slot is freed.
func TestCancelledStreamIsChargedAndReleased(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, _ := store.CreateAccount(ctx, "acme")
	key, _, _ := authz.CreateKey(ctx, store, acct.ID, "", nil)
	lim := &countingLimiter{Limiter: memory.New(memory.Config{}), charged: make(chan int64, 4), released: make(chan struct{}, 4)}
	srv, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
			Models: []routing.Model{{ID: "m", Deployments: []routing.Deployment{{Backend: "main", Model: "m"}}}}},
		Limiter: lim, KeyLimits: authz.Limits{ConcurrentRequests: limit(1), TokensPerMinute: limit(100000)},
	}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		t.Fatal(err)
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	gw := extproctest.Start(t, srv, extproctest.Config{Backends: map[string]http.Handler{"main": upstream}})
	reqCtx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(reqCtx, "POST", gw.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Ratelimit-Limit-Tokens") != "100000" {
		t.Errorf("stream headers = %v", resp.Header)
	}
	reserved := lim.reserved.Load() // the stream's, before the next admission
	// While the stream runs, the one concurrency slot is taken.
	busy := gw.Post(t, "/v1/chat/completions", key, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if busy.Status != 429 || !strings.Contains(string(busy.Body), "concurrent requests") {
		t.Errorf("second concurrent request: %d %s", busy.Status, busy.Body)
	}
	bufio.NewReader(resp.Body).ReadString('\n')
	cancel()
	resp.Body.Close()
	select {
	case tokens := <-lim.charged:
		if tokens+reserved != 8 {
			t.Errorf("charged %d tokens beside the %d reserved, want 8 in all", tokens, reserved)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled stream was not charged")
	}
	select {
	case <-lim.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled stream's slot was not released")
	}
}

// A failing limiter admits (fail open) by default and refuses with a 503
// when configured to fail closed.
func TestLimiterFailureModes(t *testing.T) {
	for _, closed := range []bool{false, true} {
		lim := &countingLimiter{Limiter: memory.New(memory.Config{}), charged: make(chan int64, 4), released: make(chan struct{}, 4), fail: true}
		f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
			c.Limiter = lim
			c.KeyLimits = authz.Limits{RequestsPerMinute: limit(5)}
			c.RateLimitFailClosed = closed
		})
		res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
		if !closed && res.Status != 200 {
			t.Errorf("fail open: %d %s", res.Status, res.Body)
		}
		if closed {
			checkError(t, res, wantError{status: 503, typ: "server_error", code: "rate_limiter_unavailable"})
		}
	}
}

// The concurrency slot is free once the client has its answer: sequential
// requests under a limit of one never collide.
func TestSequentialRequestsUnderOneSlot(t *testing.T) {
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Limiter = memory.New(memory.Config{})
		c.KeyLimits = authz.Limits{ConcurrentRequests: limit(1)}
	})
	streamBody := `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}],"stream":true}`
	for i := range 30 {
		body := chatBody
		if i%2 == 1 {
			body = streamBody
		}
		if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body); res.Status != 200 {
			t.Fatalf("request %d: %d %s", i+1, res.Status, res.Body)
		}
	}
}

// A request reserves the bound on the answer its provider is sent, not
// only the client's: Anthropic is sent max_tokens 4096 when the client
// sets none, and a thinking budget on top of the client's bound; a
// Fallback model reserves the most any of its deployments is sent.
func TestReservationIsTheBoundTheProviderIsSent(t *testing.T) {
	lim := &countingLimiter{Limiter: memory.New(memory.Config{}), charged: make(chan int64, 16), released: make(chan struct{}, 16)}
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Limiter = lim
		c.AccountLimits = authz.Limits{TokensPerMinute: limit(1 << 30)}
		c.Routing.Backends = append(c.Routing.Backends, routing.Backend{Name: "claude", Provider: "anthropic"})
		c.Credentials["claude"] = extproc.Credentials{APIKey: providerKey}
		c.Routing.Models = append(c.Routing.Models,
			routing.Model{ID: "claude", Deployments: []routing.Deployment{{Backend: "claude", Model: "claude-sonnet-4-20250514"}}},
			routing.Model{ID: "smart", Fallback: &routing.Fallback{}, Deployments: []routing.Deployment{
				{Backend: "main", Model: "gpt-5-nano"}, {Backend: "claude", Model: "claude-sonnet-4-20250514", Priority: 1}}})
	})
	const messages = `"messages":[{"role":"user","content":"Hello!"}]`
	prompt := func(model string) int64 { // the reservation of a request bounded to 1 token, less that token
		lim.reserved.Store(0)
		f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], `{"model":"`+model+`","max_tokens":1,`+messages+`}`)
		return lim.reserved.Load() - 1
	}
	for _, c := range []struct {
		name, model, extra string
		out                int64
	}{
		{"OpenAI, no bound: the config's default", "gpt-4o", "", 1024},
		{"OpenAI, the client's bound", "gpt-4o", `"max_tokens":300,`, 300},
		{"Anthropic, no bound: the max_tokens it is sent", "claude", "", anthropic.DefaultMaxTokens},
		{"Anthropic, the client's bound", "claude", `"max_completion_tokens":300,`, 300},
		{"Anthropic with thinking: the budget and the default", "claude", `"max_tokens":300,"reasoning_effort":"low",`, 2048 + anthropic.DefaultMaxTokens},
		{"Fallback to Anthropic, no bound: the most a deployment is sent", "smart", "", anthropic.DefaultMaxTokens},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := prompt(c.model)
			lim.reserved.Store(0)
			f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], `{"model":"`+c.model+`",`+c.extra+messages+`}`)
			// The prompt is estimated from the provider's body, which the
			// members that bound the answer change by a few tokens.
			if got := lim.reserved.Load() - base; got < c.out-20 || got > c.out+20 {
				t.Errorf("reserved %d beside the prompt, want %d give or take the prompt's few tokens", got, c.out)
			}
		})
	}
	// The Responses API on Anthropic goes through the chat translator,
	// whose bound is the one reserved.
	lim.reserved.Store(0)
	f.gw.Post(t, "/v1/responses", f.keys["valid"], `{"model":"claude","input":"Hello!"}`)
	if got := lim.reserved.Load(); got < anthropic.DefaultMaxTokens || got > anthropic.DefaultMaxTokens+40 {
		t.Errorf("a Responses request to Anthropic reserved %d, want its prompt and %d", got, anthropic.DefaultMaxTokens)
	}
}
