package extproc_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"modelgate/cmd/mockprovider/replay"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/extproc/guard"
	"modelgate/testdata"
	"modelgate/translate"
)

// A request rule that blocks refuses a request whose text matches, on
// every front door it checks (chat, Responses, Messages), in the client's
// API's shape (400 content_filter; Anthropic's invalid_request_error), with
// x-should-retry: false, naming the rule but never what matched; nothing
// of it reaches a provider. A request that does not match, or matches
// only in a part the rule does not read, goes on.
func TestRequestGuardrailBlocks(t *testing.T) {
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	var upstream atomic.Int64
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream.Add(1)
		mock.ServeHTTP(w, r)
	})
	f := newFixture(t, extproctest.Config{Backends: map[string]http.Handler{"main": counting, "evil": counting}}, func(c *extproc.Config) {
		c.Guardrails.Rules = []*guard.Rule{{Name: "no-forbidden", Check: "regex", Patterns: []*regexp.Regexp{regexp.MustCompile(`(?i)forbidden-word`)},
			Parts: []translate.Part{translate.PartUser, translate.PartToolResult}}}
	})
	for _, tt := range []struct {
		name, path, body string
		blocked          bool
	}{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"say FORBIDDEN-WORD"}]}`, true},
		{"chat, a tool's result", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"forbidden-word"}]}`, true},
		{"chat stream", "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"forbidden-word"}]}]}`, true},
		{"responses", "/v1/responses", `{"model":"gpt-4o","input":"forbidden-word"}`, true},
		{"responses items", "/v1/responses", `{"model":"gpt-4o","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"a forbidden-word"}]}]}`, true},
		{"messages", "/v1/messages", `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"forbidden-word"}]}`, true},
		{"messages stream", "/v1/messages", `{"model":"gpt-4o","max_tokens":100,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"forbidden-word"}]}]}`, true},
		// The rule reads user text and tool results, not the system.
		{"chat, the system only", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"system","content":"forbidden-word"},{"role":"user","content":"Hello!"}]}`, false},
		{"chat, clean", "/v1/chat/completions", chatBody, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := upstream.Load()
			res := f.gw.Post(t, tt.path, f.keys["valid"], tt.body)
			reached := upstream.Load() > before
			if !tt.blocked {
				if res.Status != 200 || !reached {
					t.Fatalf("%d (reached the provider: %v) %s, want it to go on", res.Status, reached, res.Body)
				}
				return
			}
			if res.Status != 400 || reached {
				t.Fatalf("%d (reached the provider: %v) %s, want 400 and no provider", res.Status, reached, res.Body)
			}
			if res.Header.Get("x-should-retry") != "false" {
				t.Errorf("x-should-retry %q", res.Header.Get("x-should-retry"))
			}
			if strings.Contains(strings.ToLower(string(res.Body)), "forbidden-word") || !strings.Contains(string(res.Body), "no-forbidden") {
				t.Errorf("the refusal %s holds what matched, or does not name the rule", res.Body)
			}
			var e struct {
				Type  string
				Error struct{ Type, Code string }
			}
			if err := json.Unmarshal(res.Body, &e); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tt.path, "/v1/messages") {
				if e.Type != "error" || e.Error.Type != "invalid_request_error" {
					t.Errorf("a Messages client got %s", res.Body)
				}
			} else if e.Error.Type != "invalid_request_error" || e.Error.Code != "content_filter" {
				t.Errorf("got %s, want invalid_request_error content_filter", res.Body)
			}
		})
	}
}

// An answer larger than Envoy's buffer, which the server gathers from a
// stream (bodyGather), is checked whole before any of it goes: blocked,
// or masked.
func TestResponseGuardrailGatheredAnswer(t *testing.T) {
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	prompt := strings.Repeat("a long prompt, echoed back. ", 200) + "zebra-42 " + strings.Repeat("and more. ", 50)
	body := `{"model":"agent","messages":[{"role":"user","content":"` + prompt + `"}]}`
	for _, action := range []guard.Action{guard.Block, guard.Mask} {
		f := newFixture(t, extproctest.Config{Backends: map[string]http.Handler{"main": mock}}, func(c *extproc.Config) {
			c.MaxBufferedResponseBytes = 1024
			c.Routing.Models = append(c.Routing.Models, routing.Model{ID: "agent", OwnedBy: "test", Deployments: []routing.Deployment{{Backend: "main", Model: "mock-agent"}}})
			c.Guardrails.Rules = []*guard.Rule{{Name: "no-zebra", Check: "regex", Phase: guard.Response, Action: action,
				Patterns: []*regexp.Regexp{regexp.MustCompile(`zebra-[0-9]+`)}, Kinds: []translate.TextKind{translate.TextAnswer}}}
			c.Guardrails.Window = guard.Window{Size: 64, Overlap: 32}
		})
		res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body)
		if res.Status != 200 || len(res.Body) < 4096 && action == guard.Mask {
			t.Fatalf("%v: %d, %d bytes: %.300s", action, res.Status, len(res.Body), res.Body)
		}
		var a struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct{ Content *string }
			}
		}
		if err := json.Unmarshal(res.Body, &a); err != nil || len(a.Choices) != 1 {
			t.Fatalf("%v: %v %.300s", action, err, res.Body)
		}
		c := a.Choices[0]
		switch {
		case strings.Contains(string(res.Body), "zebra-42"):
			t.Errorf("%v: the match reached the client", action)
		case action == guard.Block && (c.FinishReason != "content_filter" || c.Message.Content != nil):
			t.Errorf("blocked: %s, %v", c.FinishReason, c.Message.Content)
		case action == guard.Mask && (c.FinishReason != "stop" || !strings.Contains(*c.Message.Content, " [masked:")):
			t.Errorf("masked: %s, %.200s", c.FinishReason, *c.Message.Content)
		}
	}
}

// A request whose JSON names a member twice in any case is refused when
// rules read it: the rules would read one text, a provider another.
func TestRequestGuardrailAmbiguousMembers(t *testing.T) {
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	rule := &guard.Rule{Name: "no-secret", Check: "regex", Patterns: []*regexp.Regexp{regexp.MustCompile(`secret`)}, Parts: []translate.Part{translate.PartUser}}
	f := newFixture(t, extproctest.Config{Backends: map[string]http.Handler{"main": mock}}, func(c *extproc.Config) {
		c.Guardrails.Rules = []*guard.Rule{rule}
	})
	for _, body := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"secret","Content":"benign"}]}`,
		`{"model":"gpt-4o","messages":[{"role":"user","content":"benign"}],"MESSAGES":[{"role":"user","content":"secret"}]}`,
	} {
		res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body)
		if res.Status != 400 || !strings.Contains(string(res.Body), "names a member twice") {
			t.Errorf("%s: %d %s", body, res.Status, res.Body)
		}
	}
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
		t.Errorf("a plain request: %d %s", res.Status, res.Body)
	}
}
