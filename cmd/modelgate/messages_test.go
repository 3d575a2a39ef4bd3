package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/cmd/mockprovider/replay"
)

// anthropicCall sends a Messages API request as Anthropic's clients do:
// the key in x-api-key, with anthropic-version and the headers given.
func anthropicCall(t *testing.T, method, url, key, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// lastRequest is the mock provider's latest request to path.
func lastRequest(t *testing.T, mock *replay.Server, path string) replay.Request {
	t.Helper()
	reqs := mock.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == path {
			return reqs[i]
		}
	}
	t.Fatalf("the provider got no request to %s", path)
	return replay.Request{}
}

// The Messages API's front door with an Anthropic provider: HEAD / is
// answered without a key; a request with its key in x-api-key reaches
// Anthropic as sent (but for the model and the key), anthropic-beta
// too, and its answer, JSON or stream, comes back as Anthropic gave it;
// count_tokens is Anthropic's; GET /v1/models has Anthropic's shape for
// its clients; the gateway's own errors have Anthropic's shape; and the
// ledger records the request with its usage.
func TestMessagesPassthrough(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	base := strings.TrimSuffix(a.Gateway, "/v1")

	if resp, body := anthropicCall(t, "HEAD", base+"/", "", ""); resp.StatusCode != 200 || len(body) != 0 {
		t.Errorf("HEAD /: %d %q", resp.StatusCode, body)
	}

	const body = `{"model":"agent-claude","max_tokens":1024,"system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":"Say hello."}],"metadata":{"user_id":"u-1"}}`
	resp, got := anthropicCall(t, "POST", a.Gateway+"/messages?beta=true", a.APIKey, body,
		"anthropic-beta", "interleaved-thinking-2025-05-14,a-beta-the-gateway-never-heard-of", "x-claude-code-session-id", "sess-1")
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/messages: %d %s", resp.StatusCode, got)
	}
	var msg struct {
		Type    string
		Role    string
		Content []struct{ Type, Text string }
		Usage   struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(got, &msg); err != nil || msg.Type != "message" || msg.Role != "assistant" || len(msg.Content) == 0 ||
		msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("the answer is not Anthropic's message: %v %s", err, got)
	}
	up := lastRequest(t, a.Mock, "/v1/messages")
	want := strings.Replace(body, `"agent-claude"`, `"claude-sonnet-4-5-mock-agent"`, 1)
	if string(up.Body) != want {
		t.Errorf("upstream body:\n%s\nwant the client's with the upstream model:\n%s", up.Body, want)
	}
	if up.Header.Get("anthropic-beta") != "interleaved-thinking-2025-05-14,a-beta-the-gateway-never-heard-of" ||
		up.Header.Get("anthropic-version") != "2023-06-01" || up.Header.Get("x-claude-code-session-id") != "sess-1" {
		t.Errorf("upstream headers: %v", up.Header)
	}
	if k := up.Header.Get("x-api-key"); k == a.APIKey || strings.Contains(strings.Join(up.Header.Values("authorization"), " "), a.APIKey) {
		t.Errorf("the client's key reached the provider: x-api-key %q", k)
	}

	// Claude on Vertex AI gets it at rawPredict: the body as sent but for
	// the model, which is in the path, and Vertex's anthropic_version; the
	// betas as sent, but for those of what the model does not enable (the
	// 1M-token context's premium price), named in the warning.
	resp, got = anthropicCall(t, "POST", a.Gateway+"/messages", a.APIKey, strings.Replace(body, "agent-claude", "vertex-claude", 1),
		"anthropic-beta", "context-1m-2025-08-07,interleaved-thinking-2025-05-14")
	if err := json.Unmarshal(got, &msg); resp.StatusCode != 200 || err != nil || msg.Type != "message" {
		t.Fatalf("Claude on Vertex AI: %d %s", resp.StatusCode, got)
	}
	reqs := a.Mock.Requests()
	vertex := reqs[len(reqs)-1]
	if !strings.HasSuffix(vertex.Path, "/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict") ||
		!sameMembers(t, vertex.Body, body, map[string]string{"model": "", "anthropic_version": `"vertex-2023-10-16"`}) ||
		vertex.Header.Get("anthropic-beta") != "interleaved-thinking-2025-05-14" {
		t.Errorf("Claude on Vertex AI got %s %s %v", vertex.Path, vertex.Body, vertex.Header)
	}
	if w := resp.Header.Get("x-modelgate-warning"); !strings.Contains(w, "beta context-1m-2025-08-07") {
		t.Errorf("Claude on Vertex AI: warning %q, want the beta left out named", w)
	}

	// Claude on Bedrock gets it at InvokeModel: the body as sent but for
	// the model (in the path) and stream, with Bedrock's anthropic_version
	// and the betas Bedrock takes in anthropic_beta (the others, which
	// Bedrock refuses, left out with their members: mcp_servers; and the
	// 1M-token context's, which the model does not enable); its
	// stream's event-stream chunks come back as the Messages API's events.
	for _, stream := range []bool{false, true} {
		b := strings.Replace(body, "agent-claude", "agent-bedrock", 1)
		b = strings.Replace(b, `"max_tokens":1024,`, `"max_tokens":1024,"mcp_servers":[{"type":"url","url":"https://mcp.example.com","name":"x"}],`, 1)
		if stream {
			b = strings.Replace(b, `"max_tokens":1024,`, `"max_tokens":1024,"stream":true,`, 1)
		}
		resp, got = anthropicCall(t, "POST", a.Gateway+"/messages", a.APIKey, b, "anthropic-beta",
			"claude-code-20250219,context-1m-2025-08-07, interleaved-thinking-2025-05-14,mcp-servers-2025-12-04")
		if resp.StatusCode != 200 {
			t.Fatalf("Claude on Bedrock: %d %s", resp.StatusCode, got)
		}
		if stream {
			if content, stop, usage := messageOfEvents(t, parseEvents(t, got)); len(content) == 0 || stop != "end_turn" || usage["output_tokens"] == nil ||
				bytes.Contains(got, []byte("amazon-bedrock-invocationMetrics")) {
				t.Errorf("Claude on Bedrock's stream: %s", got)
			}
		} else if err := json.Unmarshal(got, &msg); err != nil || msg.Type != "message" {
			t.Errorf("Claude on Bedrock: %s", got)
		}
		reqs := a.Mock.Requests()
		invoke := reqs[len(reqs)-1]
		op := "/invoke"
		if stream {
			op = "/invoke-with-response-stream"
		}
		if !strings.HasSuffix(invoke.Path, op) || !sameMembers(t, invoke.Body, b, map[string]string{"model": "", "stream": "", "mcp_servers": "",
			"anthropic_version": `"bedrock-2023-05-31"`, "anthropic_beta": `["interleaved-thinking-2025-05-14"]`}) {
			t.Errorf("Claude on Bedrock got %s %s", invoke.Path, invoke.Body)
		}
	}

	// A stream comes back event for event.
	resp, got = anthropicCall(t, "POST", a.Gateway+"/messages", a.APIKey,
		`{"model":"agent-claude","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("content-type"), got)
	}
	var events []string
	for _, line := range strings.Split(string(got), "\n") {
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		}
	}
	if len(events) < 4 || events[0] != "message_start" || events[len(events)-1] != "message_stop" || !slices.Contains(events, "message_delta") {
		t.Errorf("stream events %v:\n%s", events, got)
	}

	// count_tokens is the provider's own count.
	resp, got = anthropicCall(t, "POST", a.Gateway+"/messages/count_tokens", a.APIKey,
		`{"model":"agent-claude","messages":[{"role":"user","content":"Say hello, and more than that."}]}`)
	var count struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(got, &count) != nil || count.InputTokens == 0 {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, got)
	}
	if up := lastRequest(t, a.Mock, "/v1/messages/count_tokens"); !bytes.Contains(up.Body, []byte(`"claude-sonnet-4-5-mock-agent"`)) {
		t.Errorf("count_tokens upstream: %s", up.Body)
	}

	// Claude on Bedrock's count is Bedrock's CountTokens, for the model's
	// foundation id (CountTokens refuses cross-region profiles).
	resp, got = anthropicCall(t, "POST", a.Gateway+"/messages/count_tokens", a.APIKey,
		`{"model":"agent-bedrock","messages":[{"role":"user","content":"Say hello, and more than that."}]}`)
	if err := json.Unmarshal(got, &count); resp.StatusCode != 200 || err != nil || count.InputTokens == 0 {
		t.Errorf("count_tokens on Claude on Bedrock: %d %s", resp.StatusCode, got)
	}
	if up := lastRequest(t, a.Mock, "/model/anthropic.claude-sonnet-4-5-mock-agent-v1:0/count-tokens"); !bytes.Contains(up.Body, []byte(`"invokeModel"`)) {
		t.Errorf("Bedrock's CountTokens got %s", up.Body)
	}

	// Elsewhere count_tokens is the gateway's estimate.
	for _, model := range []string{"agent-gpt", "agent-gemini", "vertex-claude", "command-r", "nova-micro"} {
		resp, got := anthropicCall(t, "POST", a.Gateway+"/messages/count_tokens", a.APIKey,
			`{"model":"`+model+`","messages":[{"role":"user","content":"Say hello, and more than that."}]}`)
		var count struct {
			InputTokens int64 `json:"input_tokens"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(got, &count) != nil || count.InputTokens == 0 {
			t.Errorf("count_tokens on %s: %d %s", model, resp.StatusCode, got)
		}
	}

	// Anthropic's clients list models in Anthropic's shape.
	resp, got = anthropicCall(t, "GET", a.Gateway+"/models", a.APIKey, "")
	var models struct {
		Data []struct {
			Type, ID string
		}
		HasMore *bool `json:"has_more"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(got, &models) != nil || models.HasMore == nil || len(models.Data) == 0 || models.Data[0].Type != "model" {
		t.Errorf("GET /v1/models for Anthropic's clients: %d %s", resp.StatusCode, got)
	}

	// The gateway's own errors in Anthropic's shape.
	for _, tc := range []struct {
		key, body, errType string
		status             int
	}{
		{"", body, "authentication_error", 401},
		{"sk-wrong", body, "authentication_error", 401},
		{a.APIKey, `{"model":"no-such-model","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`, "not_found_error", 404},
		{a.APIKey, `{"model":"agent-claude","messages":[{"role":"user","content":"Hi"}]}`, "invalid_request_error", 400},
		{a.APIKey, `{"model":"agent-claude","max_tokens":10,"messages":[{"content":"Hi"}]}`, "invalid_request_error", 400},
	} {
		resp, got := anthropicCall(t, "POST", a.Gateway+"/messages", tc.key, tc.body)
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != tc.status || json.Unmarshal(got, &e) != nil || e.Type != "error" || e.Error.Type != tc.errType || e.Error.Message == "" {
			t.Errorf("key %q, %s: %d %s; want %d %s in Anthropic's shape", tc.key, tc.body, resp.StatusCode, got, tc.status, tc.errType)
		}
	}

	// The ledger has the requests, with their usage, and Claude Code's
	// session.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, b := a.admin(t, "GET", "/admin/v1/requests?limit=100", "")
		var page struct {
			Data []struct {
				Endpoint     string
				Status       int
				PromptTokens int64  `json:"prompt_tokens"`
				SessionID    string `json:"session_id"`
			}
		}
		json.Unmarshal(b, &page)
		n, sessions := 0, 0
		for _, r := range page.Data {
			if r.Endpoint == "messages" && r.Status == 200 && r.PromptTokens > 0 {
				n++
			}
			if r.SessionID == "sess-1" {
				sessions++
			}
		}
		if n == 5 && sessions != 1 {
			t.Fatalf("%d requests of session sess-1 in the ledger, want 1:\n%s", sessions, b)
		}
		if n == 5 { // agent-claude, its stream, Claude on Vertex AI, Claude on Bedrock and its stream
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger has %d successful messages requests with usage, want 5:\n%s", n, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sseEvent is one event of a Messages API stream.
type sseEvent struct {
	Type string
	Data map[string]any
}

func parseEvents(t *testing.T, stream []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, raw := range strings.Split(strings.TrimSpace(string(stream)), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(raw, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.Type = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				if err := json.Unmarshal([]byte(v), &ev.Data); err != nil {
					t.Fatalf("event data %q: %v", v, err)
				}
			}
		}
		out = append(out, ev)
	}
	return out
}

// messageOfEvents checks a Messages stream against the documented event
// sequence (message_start; per block content_block_start, its deltas,
// content_block_stop, each exactly once and in order; message_delta;
// message_stop; pings anywhere), each event's type member naming it, and
// rebuilds the message the events describe, as a client does.
func messageOfEvents(t *testing.T, events []sseEvent) (content []map[string]any, stop string, usage map[string]any) {
	t.Helper()
	state := "start"
	open := -1
	var partial []string
	for i, ev := range events {
		if ev.Data["type"] != ev.Type {
			t.Fatalf("event %d %s has data type %v", i, ev.Type, ev.Data["type"])
		}
		idx := -1
		if f, ok := ev.Data["index"].(float64); ok {
			idx = int(f)
		}
		switch ev.Type {
		case "ping":
			continue
		case "message_start":
			if state != "start" {
				t.Fatalf("event %d: message_start in state %s", i, state)
			}
			state = "blocks"
		case "content_block_start":
			if state != "blocks" || open >= 0 || idx != len(content) {
				t.Fatalf("event %d: content_block_start index %d in state %s (open %d, %d blocks)", i, idx, state, open, len(content))
			}
			open = idx
			content = append(content, ev.Data["content_block"].(map[string]any))
			partial = append(partial, "")
		case "content_block_delta":
			if open < 0 || idx != open {
				t.Fatalf("event %d: a delta of block %d while %d is open", i, idx, open)
			}
			d := ev.Data["delta"].(map[string]any)
			b := content[open]
			switch d["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + d["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + d["thinking"].(string)
			case "signature_delta":
				b["signature"] = d["signature"]
			case "input_json_delta":
				partial[open] += d["partial_json"].(string)
			default:
				t.Fatalf("event %d: delta type %v", i, d["type"])
			}
		case "content_block_stop":
			if open < 0 || idx != open {
				t.Fatalf("event %d: content_block_stop of %d while %d is open", i, idx, open)
			}
			if content[open]["type"] == "tool_use" {
				var input any = map[string]any{}
				if partial[open] != "" {
					if err := json.Unmarshal([]byte(partial[open]), &input); err != nil {
						t.Fatalf("tool input %q: %v", partial[open], err)
					}
				}
				content[open]["input"] = input
			}
			open = -1
		case "message_delta":
			if state != "blocks" || open >= 0 {
				t.Fatalf("event %d: message_delta in state %s, block %d open", i, state, open)
			}
			state = "delta"
			stop, _ = ev.Data["delta"].(map[string]any)["stop_reason"].(string)
			usage, _ = ev.Data["usage"].(map[string]any)
		case "message_stop":
			if state != "delta" || i != len(events)-1 {
				t.Fatalf("event %d: message_stop in state %s, %d events", i, state, len(events))
			}
			state = "stopped"
		default:
			t.Fatalf("event %d: unknown event %s", i, ev.Type)
		}
	}
	if state != "stopped" {
		t.Fatalf("the stream ended in state %s", state)
	}
	return content, stop, usage
}

// Claude Code's loop through the bridges (and Bedrock's InvokeModel): a
// Messages request with a shell tool and thinking on, to the scripted
// model on OpenAI's chat, Gemini and Claude on Bedrock, streamed and not: the model calls the
// tool, the client sends the whole assistant turn back (its signed
// thinking too) with the tool's result, and the model answers with it.
// The scripted providers refuse a turn whose thinking or signatures did
// not come back as they gave them.
func TestMessagesBridges(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	const tools = `[{"name":"Bash","description":"Run a shell command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}]`
	for _, model := range []string{"agent-gpt", "agent-gemini", "agent-bedrock"} {
		for _, stream := range []bool{false, true} {
			name := model
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				streamMember := ""
				if stream {
					streamMember = `"stream":true,`
				}
				user := `{"role":"user","content":[{"type":"text","text":"Run ` + "`echo bridged-" + model + "`" + ` and tell me what it printed."}]}`
				turn := func(messages string) ([]map[string]any, string, map[string]any) {
					body := `{"model":"` + model + `","max_tokens":8000,` + streamMember + `"thinking":{"type":"enabled","budget_tokens":4000},"tools":` + tools +
						`,"messages":[` + messages + `]}`
					resp, got := anthropicCall(t, "POST", a.Gateway+"/messages", a.APIKey, body)
					if resp.StatusCode != 200 {
						t.Fatalf("%d %s", resp.StatusCode, got)
					}
					if stream {
						return messageOfEvents(t, parseEvents(t, got))
					}
					var msg struct {
						Type       string
						Content    []map[string]any
						StopReason string `json:"stop_reason"`
						Usage      map[string]any
					}
					if err := json.Unmarshal(got, &msg); err != nil || msg.Type != "message" {
						t.Fatalf("not a message: %v %s", err, got)
					}
					return msg.Content, msg.StopReason, msg.Usage
				}
				content, stop, usage := turn(user)
				if stop != "tool_use" || usage["output_tokens"] == nil {
					t.Fatalf("turn 1: stop %q, usage %v, content %v", stop, usage, content)
				}
				var call map[string]any
				for _, b := range content {
					if b["type"] == "tool_use" {
						call = b
					}
				}
				if call == nil || !strings.Contains(string(mustMarshal(t, call["input"])), "echo bridged-"+model) {
					t.Fatalf("turn 1: no Bash call with the command: %v", content)
				}
				if model != "agent-gpt" && content[0]["type"] != "thinking" {
					t.Errorf("turn 1: the answer does not start with the model's thinking: %v", content)
				}
				assistant := `{"role":"assistant","content":` + string(mustMarshal(t, content)) + `}`
				result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + call["id"].(string) + `","content":"bridged-` + model + `\n"}]}`
				content, stop, _ = turn(user + "," + assistant + "," + result)
				text := ""
				for _, b := range content {
					if b["type"] == "text" {
						text += b["text"].(string)
					}
				}
				if stop != "end_turn" || !strings.Contains(text, "bridged-"+model) {
					t.Fatalf("turn 2: stop %q, text %q, content %v", stop, text, content)
				}
			})
		}
	}
}

// A Messages request is charged, limited and budgeted as a chat request:
// priced into the ledger (endpoint messages), refused with Anthropic's
// rate_limit_error and a retry-after past the account's requests per
// minute, and refused once the account's budget is spent.
func TestMessagesChargedLimitedBudgeted(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	if status, body := a.admin(t, "PUT", "/admin/v1/prices", `{"model":"agent-claude","input":"1000","output":"1000"}`); status != 200 {
		t.Fatalf("price: %d %s", status, body)
	}
	newKey := func(name, settings string) string {
		status, body := a.admin(t, "POST", "/admin/v1/accounts", `{"name":"`+name+`"}`)
		var acct struct{ ID string }
		if json.Unmarshal(body, &acct); status/100 != 2 || acct.ID == "" {
			t.Fatalf("account: %d %s", status, body)
		}
		if status, body := a.admin(t, "PATCH", "/admin/v1/accounts/"+acct.ID, settings); status != 200 {
			t.Fatalf("account settings %s: %d %s", settings, status, body)
		}
		status, body = a.admin(t, "POST", "/admin/v1/accounts/"+acct.ID+"/keys", `{"name":"k"}`)
		var created struct{ Secret string }
		if json.Unmarshal(body, &created); status/100 != 2 || created.Secret == "" {
			t.Fatalf("key: %d %s", status, body)
		}
		return created.Secret
	}
	const body = `{"model":"agent-claude","max_tokens":100,"messages":[{"role":"user","content":"Say hello."}]}`
	refusal := func(key string) (*http.Response, string) {
		t.Helper()
		resp, got := anthropicCall(t, "POST", a.Gateway+"/messages", key, body)
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != 429 || json.Unmarshal(got, &e) != nil || e.Type != "error" || e.Error.Type != "rate_limit_error" {
			t.Fatalf("want Anthropic's 429 rate_limit_error, got %d %s", resp.StatusCode, got)
		}
		return resp, e.Error.Message
	}

	limited := newKey("limited", `{"limits":{"requests_per_minute":1}}`)
	if resp, got := anthropicCall(t, "POST", a.Gateway+"/messages", limited, body); resp.StatusCode != 200 {
		t.Fatalf("first request under the limit: %d %s", resp.StatusCode, got)
	}
	if resp, _ := refusal(limited); resp.Header.Get("retry-after") == "" {
		t.Errorf("the rate limit refusal has no retry-after: %v", resp.Header)
	}

	// A budget smaller than one request's cost: the first is served (the
	// budget was not yet spent), the next refused.
	budgeted := newKey("budgeted", `{"budget":{"amount":"0.000001","period":"month"}}`)
	if resp, got := anthropicCall(t, "POST", a.Gateway+"/messages", budgeted, body); resp.StatusCode != 200 {
		t.Fatalf("first request within the budget: %d %s", resp.StatusCode, got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, got := anthropicCall(t, "POST", a.Gateway+"/messages", budgeted, body)
		if resp.StatusCode == 429 {
			if _, msg := refusal(budgeted); !strings.Contains(strings.ToLower(msg), "budget") && !strings.Contains(strings.ToLower(msg), "quota") {
				t.Errorf("the budget refusal says %q", msg)
			}
			break
		}
		if resp.StatusCode != 200 || time.Now().After(deadline) {
			t.Fatalf("over budget: %d %s", resp.StatusCode, got)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The served requests are priced in the ledger, as messages.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, got := a.admin(t, "GET", "/admin/v1/requests?limit=100", "")
		var page struct {
			Data []struct {
				Endpoint string
				Status   int
				Cost     *string
			}
		}
		json.Unmarshal(got, &page)
		priced := 0
		for _, r := range page.Data {
			if r.Endpoint == "messages" && r.Status == 200 && r.Cost != nil && *r.Cost != "0.00" {
				priced++
			}
		}
		if priced >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d priced messages requests in the ledger, want at least 2:\n%s", priced, got)
		}
	}
}

// sameMembers reports whether relayed has the members of sent, changed
// as changes says: a member given "" is left out, another set to its
// JSON.
func sameMembers(t *testing.T, relayed []byte, sent string, changes map[string]string) bool {
	t.Helper()
	var want, got map[string]json.RawMessage
	if json.Unmarshal([]byte(sent), &want) != nil || json.Unmarshal(relayed, &got) != nil {
		return false
	}
	for k, v := range changes {
		if v == "" {
			delete(want, k)
		} else {
			want[k] = json.RawMessage(v)
		}
	}
	return bytes.Equal(mustMarshal(t, want), mustMarshal(t, got))
}

// The betas of what a model does not enable never reach Anthropic, and
// the others do, on a model with one deployment and on a Fallback model,
// whose attempts read the client's anthropic-version and anthropic-beta
// from the request headers Envoy keeps for all of them: those two stay on
// a Messages request until its translator sets (or removes) them, while
// every other provider header of the client's is removed at once.
func TestMessagesBetasOnEveryRoute(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"Hi."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}`)
	}))
	t.Cleanup(up.Close)
	g := serveConfigGateway(t, fmt.Sprintf(`backends:
  - {name: a, provider: anthropic, base_url: %[1]q, api_key_env: FAULT_PROVIDER_KEY}
  - {name: b, provider: anthropic, base_url: %[1]q, api_key_env: FAULT_PROVIDER_KEY}
models:
  - {id: claude, deployments: [{backend: a, model: claude-up}]}
  - {id: claude-fb, deployments: [{backend: a, model: claude-up}, {backend: b, model: claude-up, priority: 1}], fallback: {}}
`, up.URL))
	for _, tt := range []struct{ model, beta, want string }{
		{"claude", "interleaved-thinking-2025-05-14,context-1m-2025-08-07", "interleaved-thinking-2025-05-14"},
		{"claude", "context-1m-2025-08-07", ""},
		{"claude-fb", "interleaved-thinking-2025-05-14,context-1m-2025-08-07", "interleaved-thinking-2025-05-14"},
		{"claude-fb", "context-1m-2025-08-07", ""},
	} {
		resp, body := anthropicCall(t, "POST", g.url+"/messages", g.key,
			`{"model":"`+tt.model+`","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			"anthropic-version", "2023-06-01", "anthropic-beta", tt.beta, "x-amzn-bedrock-service-tier", "priority")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tt.model, resp.StatusCode, body)
		}
		mu.Lock()
		h := got[len(got)-1]
		mu.Unlock()
		if h.Get("anthropic-beta") != tt.want || h.Get("anthropic-version") != "2023-06-01" || h.Get("x-amzn-bedrock-service-tier") != "" {
			t.Errorf("%s with %q: Anthropic got anthropic-beta %q, anthropic-version %q, x-amzn-bedrock-service-tier %q; want %q, 2023-06-01, none",
				tt.model, tt.beta, h.Get("anthropic-beta"), h.Get("anthropic-version"), h.Get("x-amzn-bedrock-service-tier"), tt.want)
		}
	}
}
