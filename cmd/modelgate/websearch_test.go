package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Through `modelgate dev` with agent-claude allowed to search and priced
// per search: a Messages request with Anthropic's web search tool, JSON
// and streamed, and a chat request with web_search_options, make the
// scripted Claude search once; its answer reports the search, the ledger
// records it on each request, and each cost is the tokens' plus one
// search's price.
func TestWebSearchRecordedAndPriced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "modelgate.yaml")
	conf := `
backends:
  - {name: mock-anthropic, provider: anthropic, base_url: "http://127.0.0.1:1"}
models:
  - id: agent-claude
    web_search: true
    deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]
prices:
  models:
    - {model: agent-claude, input: "3", output: "15", web_search: "0.01"}
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	const tools = `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]`
	const question = `"messages":[{"role":"user","content":"Who won Euro 2024?"}]`
	resp, body := anthropicCall(t, "POST", a.Gateway+"/messages", a.APIKey, `{"model":"agent-claude","max_tokens":1024,`+tools+`,`+question+`}`)
	var msg struct {
		Content []struct{ Type string }
		Usage   struct {
			ServerToolUse struct {
				WebSearchRequests int64 `json:"web_search_requests"`
			} `json:"server_tool_use"`
		}
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &msg) != nil || len(msg.Content) == 0 || msg.Content[0].Type != "server_tool_use" ||
		msg.Usage.ServerToolUse.WebSearchRequests != 1 {
		t.Fatalf("POST /v1/messages: %d %s; want a search first and 1 web search in the usage", resp.StatusCode, body)
	}
	resp, body = anthropicCall(t, "POST", a.Gateway+"/messages", a.APIKey, `{"model":"agent-claude","max_tokens":1024,"stream":true,`+tools+`,`+question+`}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"server_tool_use":{"web_search_requests":1}`) {
		t.Fatalf("streamed POST /v1/messages: %d %s", resp.StatusCode, body)
	}
	if status, body := a.call(t, "POST", "/chat/completions", a.APIKey, `{"model":"agent-claude","web_search_options":{},`+question+`}`); status != 200 {
		t.Fatalf("chat with web_search_options: %d %s", status, body)
	}

	var page struct {
		Data []struct {
			Endpoint          string
			PromptTokens      int64   `json:"prompt_tokens"`
			CompletionTokens  int64   `json:"completion_tokens"`
			WebSearchRequests int64   `json:"web_search_requests"`
			Cost              *string `json:"cost"`
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body := a.admin(t, "GET", "/admin/v1/requests?model=agent-claude", "")
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Data) == 3 || time.Now().After(deadline) {
			break
		}
	}
	if len(page.Data) != 3 {
		t.Fatalf("the ledger has %d requests of agent-claude, want 3", len(page.Data))
	}
	for _, r := range page.Data {
		tokens := float64(r.PromptTokens)*3e-6 + float64(r.CompletionTokens)*15e-6
		cost := -1.0
		if r.Cost != nil {
			cost, _ = strconv.ParseFloat(*r.Cost, 64)
		}
		if r.WebSearchRequests != 1 || cost < tokens+0.01-1e-9 || cost > tokens+0.01+1e-9 {
			t.Errorf("%s: %d web searches costing %v with %d prompt and %d completion tokens; want 1, costing %.9f and 0.01",
				r.Endpoint, r.WebSearchRequests, cost, r.PromptTokens, r.CompletionTokens, tokens)
		}
	}
}
