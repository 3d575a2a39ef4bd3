package extproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit/memory"
)

// countingAnthropic answers count_tokens as Anthropic does, with 400
// tokens whatever the request.
var countingAnthropic = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages/count_tokens" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"input_tokens":400}`)
})

// count_tokens is a request like any other, whether Anthropic counts or
// the gateway estimates: it counts against the key's requests and its
// tokens per minute (the tokens counted), is refused in Anthropic's shape
// past them, and is in the ledger with the tokens counted and no cost
// (counting is free). Before, estimated counts skipped limits and the
// ledger, and Anthropic's were charged nothing, so 200 of them in 19
// seconds all reached Anthropic on a 1,000 tokens-per-minute account.
func TestCountTokensLimitedAndRecorded(t *testing.T) {
	// 1,600 bytes of text: an estimate of about 400 tokens, as Anthropic counts.
	question := strings.Repeat("How many tokens? ", 94)
	for _, tc := range []struct{ name, model string }{{"counted by Anthropic", "claude"}, {"estimated by the gateway", "gpt"}} {
		t.Run(tc.name, func(t *testing.T) {
			prices, err := pricing.NewTable([]pricing.Price{{Model: tc.model, Input: 3 * pricing.NanosPerUnit, Output: 15 * pricing.NanosPerUnit}})
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, extproctest.Config{Backends: map[string]http.Handler{"anthropic": countingAnthropic, "openai": countingAnthropic}},
				func(c *extproc.Config) {
					c.Routing = routing.Table{Backends: []routing.Backend{{Name: "anthropic", Provider: "anthropic"}, {Name: "openai", Provider: "openai"}},
						Models: []routing.Model{
							{ID: "claude", Deployments: []routing.Deployment{{Backend: "anthropic", Model: "claude-sonnet-4-5"}}},
							{ID: "gpt", Deployments: []routing.Deployment{{Backend: "openai", Model: "gpt-5"}}}}}
					c.Credentials = map[string]extproc.Credentials{"anthropic": {APIKey: providerKey}, "openai": {APIKey: providerKey}}
					c.Limiter, c.Prices = memory.New(memory.Config{}), prices
					c.AccountLimits = authz.Limits{TokensPerMinute: limit(1000)}
				})
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, tc.model, question)
			count := func() extproctest.Result {
				req, _ := http.NewRequest("POST", "/v1/messages/count_tokens", strings.NewReader(body))
				req.Header.Set("x-api-key", f.keys["valid"])
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set("content-type", "application/json")
				return f.gw.Do(t, req)
			}
			for i := range 2 {
				res := count()
				var c struct {
					InputTokens int64 `json:"input_tokens"`
				}
				if res.Status != 200 || json.Unmarshal(res.Body, &c) != nil || c.InputTokens < 350 || c.InputTokens > 450 {
					t.Fatalf("count %d: %d %s", i+1, res.Status, res.Body)
				}
			}
			res := count()
			var e struct {
				Type  string
				Error struct{ Type string }
			}
			if res.Status != 429 || json.Unmarshal(res.Body, &e) != nil || e.Type != "error" || e.Error.Type != "rate_limit_error" || res.Header.Get("Retry-After") == "" {
				t.Errorf("the third count past 1,000 tokens a minute: %d %s, want Anthropic's 429", res.Status, res.Body)
			}
			if len(res.Upstream) != 0 {
				t.Error("a refused count reached the provider")
			}
			waitRequests(t, f.store, f.account.ID, 3)
			recs, err := f.store.ListRequests(context.Background(), ledger.RequestQuery{AccountID: f.account.ID})
			if err != nil {
				t.Fatal(err)
			}
			var counted int
			for _, r := range recs {
				if r.Endpoint != "messages.count_tokens" || r.Model != tc.model {
					t.Errorf("record %+v", r)
				}
				if r.Status == 429 && r.PromptTokens != 0 {
					t.Errorf("the refused count's record: %d prompt tokens, want none", r.PromptTokens)
				}
				if r.Status == 200 {
					counted++
					if r.PromptTokens < 350 || r.PromptTokens > 450 || !r.CostKnown || r.Cost != 0 {
						t.Errorf("a count's record: %d prompt tokens, cost %v (known %v); want the tokens counted, free", r.PromptTokens, r.Cost, r.CostKnown)
					}
				}
			}
			if len(recs) != 3 || counted != 2 {
				t.Errorf("%d records, %d of them counts; want the two counts and the refusal", len(recs), counted)
			}
		})
	}
}
