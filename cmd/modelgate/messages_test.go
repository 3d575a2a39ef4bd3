package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
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
		{a.APIKey, `{"model":"agent-claude","max_tokens":10,"messages":[{"role":"system","content":"Hi"}]}`, "invalid_request_error", 400},
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

	// The ledger has the requests, with their usage.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, b := a.admin(t, "GET", "/admin/v1/requests?limit=100", "")
		var page struct {
			Data []struct {
				Endpoint     string
				Status       int
				PromptTokens int64 `json:"prompt_tokens"`
			}
		}
		json.Unmarshal(b, &page)
		n := 0
		for _, r := range page.Data {
			if r.Endpoint == "messages" && r.Status == 200 && r.PromptTokens > 0 {
				n++
			}
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger has %d successful messages requests with usage, want 2:\n%s", n, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
