package anthropic

import (
	"encoding/json"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

// agentTurn is a coding agent's request: tools, a system prompt, and a
// tool loop in progress.
const agentTurn = `{"model":"m","messages":[{"role":"system","content":"You are a coding agent."},
	{"role":"user","content":"Fix the build."},
	{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"go build\"}"}}]},
	{"role":"tool","tool_call_id":"call_1","content":"main.go:3: undefined: x"}],
	"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}},{"type":"function","function":{"name":"shell","parameters":{"type":"object"}}}]}`

// markers lists where an upstream Messages request has cache_control:
// "tools[i]", "system[i]", "messages[i].content[j]".
func markers(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var r struct {
		Tools    []map[string]json.RawMessage `json:"tools"`
		System   json.RawMessage              `json:"system"`
		Messages []struct {
			Content []map[string]json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("upstream body: %v\n%s", err, body)
	}
	out := map[string]string{}
	add := func(where string, block map[string]json.RawMessage) {
		if cc, ok := block["cache_control"]; ok {
			out[where] = string(cc)
		}
	}
	for i, b := range r.Tools {
		add("tools["+itoa(i)+"]", b)
	}
	var system []map[string]json.RawMessage
	json.Unmarshal(r.System, &system) //nolint:errcheck // a string system prompt has no blocks
	for i, b := range system {
		add("system["+itoa(i)+"]", b)
	}
	for i, m := range r.Messages {
		for j, b := range m.Content {
			add("messages["+itoa(i)+"].content["+itoa(j)+"]", b)
		}
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func autoCacheChat(t *testing.T, body string, auto bool) []byte {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	up, err := NewChat(translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-5", APIKey: "k", AutoCache: auto}, req).RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	return up.Body
}

// With automatic caching on, a request without markers gets breakpoints
// after the last tool, the system prompt and the last message (the tool
// result); off, none; and a client's own markers are left as they are.
func TestAutoCacheMarkers(t *testing.T) {
	const ephemeral = `{"type":"ephemeral"}`
	got := markers(t, autoCacheChat(t, agentTurn, true))
	want := map[string]string{"tools[1]": ephemeral, "system[0]": ephemeral, "messages[2].content[0]": ephemeral}
	if len(got) != len(want) {
		t.Errorf("markers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if got := markers(t, autoCacheChat(t, agentTurn, false)); len(got) != 0 {
		t.Errorf("automatic caching off: markers %v", got)
	}
	own := `{"model":"m","messages":[{"role":"system","content":"You are a coding agent."},
		{"role":"user","content":[{"type":"text","text":"Fix the build.","cache_control":{"type":"ephemeral","ttl":"1h"}}]},
		{"role":"assistant","content":"Which build?"},{"role":"user","content":"go build"}]}`
	got = markers(t, autoCacheChat(t, own, true))
	if len(got) != 1 || got["messages[0].content[0]"] != `{"type":"ephemeral","ttl":"1h"}` {
		t.Errorf("a client's own markers: %v, want its one marker alone", got)
	}
}
