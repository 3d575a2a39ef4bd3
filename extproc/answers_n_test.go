package extproc_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
)

// heldUpstream is an OpenAI chat upstream that holds its first answer
// until release is closed (later ones come at once), and answers with
// usage of max_tokens for each of the n answers asked for: what a
// provider charges for n full answers.
type heldUpstream struct {
	arrived chan int64 // each request's n, as it arrives
	release chan struct{}
	held    atomic.Bool
}

func newHeldUpstream() *heldUpstream {
	return &heldUpstream{arrived: make(chan int64, 16), release: make(chan struct{})}
}

func (u *heldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		N                   int64 `json:"n"`
		MaxCompletionTokens int64 `json:"max_completion_tokens"`
		MaxTokens           int64 `json:"max_tokens"`
	}
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &req) //nolint:errcheck // zero values are fine
	n, out := max(req.N, 1), max(req.MaxCompletionTokens, req.MaxTokens)
	u.arrived <- n
	if u.held.CompareAndSwap(false, true) {
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
	}
	// One choice stands for the n a provider would send: usage is what counts.
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-5-nano","choices":[{"index":0,"message":{"role":"assistant","content":"x","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}}`,
		n*out, 10+n*out)
}

// A request for n answers reserves n times its output bound, from budgets
// and token limits alike: while one asking for 128 answers of 100 tokens
// is in flight, its reservation (12,800 tokens and their price) holds
// the account's small budget and its tokens per minute, so the next
// request is refused instead of spending past them; what the account
// spends stays within its budget plus that one reservation. Before, it
// reserved one answer's bound, and 16 such requests at once spent 38
// times a budget.
func TestAnswersCountedInTheReservation(t *testing.T) {
	const nBody = `{"model":"gpt-4o","max_tokens":100,"n":128,"messages":[{"role":"user","content":"Hello!"}]}`
	const budget = 10_000_000 // 0.01: 1,000 output tokens of gpt-4o at 10 a million
	for name, tc := range map[string]struct {
		opt  func(*extproc.Config)
		want wantError
	}{
		"budget": {func(*extproc.Config) {}, wantError{status: 429, typ: "insufficient_quota", code: "insufficient_quota"}},
		"tokens per minute": {func(c *extproc.Config) {
			c.Limiter = memory.New(memory.Config{})
			c.AccountLimits = authz.Limits{TokensPerMinute: limit(2000)}
		}, wantError{status: 429, typ: "rate_limit_error", code: "rate_limit_exceeded"}},
	} {
		t.Run(name, func(t *testing.T) {
			up := newHeldUpstream()
			prices, sp := gpt4oPrices(t), memory.NewSpender()
			f := newFixture(t, extproctest.Config{Backends: map[string]http.Handler{"main": up, "evil": up}},
				func(c *extproc.Config) { c.Prices, c.Spender, c.Currency = prices, sp, "EUR" }, tc.opt)
			if name == "budget" {
				setAccountBudget(t, f, f.account, &authz.Budget{Amount: budget, Period: authz.PeriodDay})
			}
			first := make(chan extproctest.Result, 1)
			go func() { first <- f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], nBody) }()
			if n := <-up.arrived; n != 128 {
				t.Fatalf("the provider was asked for %d answers, want 128", n)
			}
			res := f.gw.Post(t, "/v1/chat/completions", f.keys["limited"], nBody) // the same account
			checkError(t, res, tc.want)
			if len(res.Upstream) != 0 {
				t.Error("the second request reached the provider while the first's reservation held the limit")
			}
			close(up.release)
			if res := <-first; res.Status != 200 {
				t.Fatalf("the first request: %d %s", res.Status, res.Body)
			}
			if name != "budget" {
				return
			}
			b := ratelimit.Budget{Key: "account:" + f.account.ID, Max: budget, Renewal: ratelimit.Daily}
			// The first's cost: 10 prompt tokens at 2.5 a million, 12,800
			// output tokens at 10 a million.
			if got, want := spent(t, sp, b), int64(10*2_500+12_800*10_000); got != want {
				t.Errorf("spent %d, want the one request's cost %d", got, want)
			}
		})
	}
}

// gpt4oPrices prices gpt-4o as budgetFixture does.
func gpt4oPrices(t *testing.T) *pricing.Table {
	t.Helper()
	prices, err := pricing.NewTable([]pricing.Price{{Model: "gpt-4o", Input: 2_500_000_000, Output: 10 * pricing.NanosPerUnit}})
	if err != nil {
		t.Fatal(err)
	}
	return prices
}
