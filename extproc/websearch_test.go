package extproc_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
)

// reservingSpender is a memory Spender that records what each admission
// reserved.
type reservingSpender struct {
	*memory.Spender
	mu       sync.Mutex
	reserved []int64
}

func (s *reservingSpender) Reserve(ctx context.Context, bs []ratelimit.Budget, at time.Time, amount int64) (ratelimit.SpendDecision, error) {
	s.mu.Lock()
	s.reserved = append(s.reserved, amount)
	s.mu.Unlock()
	return s.Spender.Reserve(ctx, bs, at, amount)
}

func (s *reservingSpender) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved[len(s.reserved)-1]
}

// The web searches Anthropic reports are recorded and priced: a Messages
// request whose web search tool allows 5 searches reserves 5 at the
// model's web_search price beside its tokens, one without max_uses none;
// the ledger records the 2 searches the answer reports, its cost counts
// them, and the budget is charged that cost.
func TestWebSearchesRecordedPricedAndReserved(t *testing.T) {
	const searchPrice = 10_000_000 // 0.01
	answer := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Spain."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":10,"server_tool_use":{"web_search_requests":2}}}`
	claude := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(answer))
	})
	prices, err := pricing.NewTable([]pricing.Price{{Model: "claude-ws", Input: 3 * pricing.NanosPerUnit, Output: 15 * pricing.NanosPerUnit, WebSearch: searchPrice}})
	if err != nil {
		t.Fatal(err)
	}
	sp := &reservingSpender{Spender: memory.NewSpender()}
	f := newFixture(t, extproctest.Config{Backends: map[string]http.Handler{"claude": claude}}, func(c *extproc.Config) {
		c.Prices, c.Spender, c.Currency = prices, sp, "USD"
		c.Routing.Backends = append(c.Routing.Backends, routing.Backend{Name: "claude", Provider: "anthropic"})
		c.Credentials["claude"] = extproc.Credentials{APIKey: providerKey}
		c.Routing.Models = append(c.Routing.Models, routing.Model{ID: "claude-ws", WebSearch: true,
			Deployments: []routing.Deployment{{Backend: "claude", Model: "claude-sonnet-4-5"}}})
	})
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: 100 * pricing.NanosPerUnit, Period: authz.PeriodMonth})
	request := func(tool string) int64 {
		t.Helper()
		body := `{"model":"claude-ws","max_tokens":100,"messages":[{"role":"user","content":"Who won Euro 2024?"}],"tools":[` + tool + `]}`
		if res := f.gw.Post(t, "/v1/messages", f.keys["valid"], body); res.Status != 200 {
			t.Fatalf("messages: %d %s", res.Status, res.Body)
		}
		return sp.last()
	}
	// The same request but for max_uses: the prompt estimates differ by
	// a token or so, a few thousand nanos either way.
	unbounded := request(`{"type":"web_search_20250305","name":"web_search","max_uses":null}`)
	bounded := request(`{"type":"web_search_20250305","name":"web_search","max_uses":5}`)
	if d := bounded - unbounded; d < 5*searchPrice-10_000 || d > 5*searchPrice+10_000 {
		t.Errorf("max_uses 5 reserved %d more than no bound, want 5 searches' %d", d, 5*searchPrice)
	}
	waitRequests(t, f.store, f.account.ID, 2)
	totals := ledgerTotals(t, f)
	// Each: 100 prompt tokens at 3, 10 completion at 15 a million, 2 searches at 0.01.
	want := pricing.Nanos(2 * (100*3_000 + 10*15_000 + 2*searchPrice))
	if totals.WebSearchRequests != 4 || totals.Cost != want || totals.UnknownCost != 0 {
		t.Errorf("ledger: %d web searches costing %v (%d unpriced), want 4 costing %v", totals.WebSearchRequests, totals.Cost, totals.UnknownCost, want)
	}
	b := ratelimit.Budget{Key: "account:" + f.account.ID, Max: 100 * pricing.NanosPerUnit, Renewal: ratelimit.Monthly}
	if got := spent(t, sp, b); got != int64(totals.Cost) {
		t.Errorf("budget counter %d, want the ledger's cost %d", got, totals.Cost)
	}
}
