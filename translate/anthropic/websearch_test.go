package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

// searchAnswer is a Message after a web search, as Anthropic's web search
// tool documents it (no recording exists): the server tool's use and its
// result, then text whose second block cites a result.
const searchAnswer = `{"id":"msg_a930390d3a","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
	`{"type":"text","text":"I'll search for when Claude Shannon was born."},` +
	`{"type":"server_tool_use","id":"srvtoolu_01WYG3ziw53XMcoyKL4XcZmE","name":"web_search","input":{"query":"claude shannon birth date"}},` +
	`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01WYG3ziw53XMcoyKL4XcZmE","content":[{"type":"web_search_result","url":"https://en.wikipedia.org/wiki/Claude_Shannon","title":"Claude Shannon - Wikipedia","encrypted_content":"EqgfCioIARgBIiQ3YTAw","page_age":"April 30, 2025"}]},` +
	`{"type":"text","text":"Based on the search results, "},` +
	`{"type":"text","text":"Claude Shannon was born on April 30, 1916, in Petoskey, Michigan","citations":[{"type":"web_search_result_location","url":"https://en.wikipedia.org/wiki/Claude_Shannon","title":"Claude Shannon - Wikipedia","encrypted_index":"Eo8BCioIAhgBIiQy","cited_text":"Claude Elwood Shannon (April 30, 1916 – February 24, 2001)"}]}],` +
	`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":6039,"output_tokens":931,"server_tool_use":{"web_search_requests":1}}}`

// web_search_options becomes Anthropic's web search tool on a model the
// operator allows it, with the user's location; the search's own blocks
// never become tool calls, and the citations become url_citation
// annotations of the spans they support. Not allowed, the request goes
// without search and the answer says so.
func TestWebSearch(t *testing.T) {
	const body = `{"model":"m","messages":[{"role":"user","content":"When was Claude Shannon born?"}],` +
		`"web_search_options":{"user_location":{"type":"approximate","approximate":{"city":"Paris","country":"FR"}}}}`
	build := func(search bool) (*chat, map[string]any) {
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		c := NewChat(translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-5", WebSearch: search}, req).(*chat)
		up, err := c.RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(up.Body, &m)
		return c, m
	}
	c, m := build(true)
	if got := mustMarshal(m["tools"]); got != `[{"name":"web_search","type":"web_search_20250305","user_location":{"city":"Paris","country":"FR","type":"approximate"}}]` {
		t.Errorf("tools %s", got)
	}
	if h := c.ResponseHeaders(200, "application/json"); h.Warning != "" {
		t.Errorf("warning %q with search on", h.Warning)
	}
	out, err := c.ResponseBody([]byte(searchAnswer), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	var cc struct {
		Choices []struct {
			Message struct {
				Content     string
				ToolCalls   []any `json:"tool_calls"`
				Annotations []api.Annotation
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	json.Unmarshal(out, &cc)
	msg := cc.Choices[0].Message
	want := "I'll search for when Claude Shannon was born.Based on the search results, Claude Shannon was born on April 30, 1916, in Petoskey, Michigan"
	if msg.Content != want || msg.ToolCalls != nil || cc.Choices[0].FinishReason != "stop" || len(msg.Annotations) != 1 {
		t.Fatalf("message %s", out)
	}
	a := msg.Annotations[0].URLCitation
	if cited := string([]rune(msg.Content)[a.StartIndex:a.EndIndex]); cited != "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan" ||
		a.URL != "https://en.wikipedia.org/wiki/Claude_Shannon" || a.Title != "Claude Shannon - Wikipedia" {
		t.Errorf("annotation %+v cites %q", a, cited)
	}

	_, m = build(false)
	if m["tools"] != nil {
		t.Errorf("tools %v with search off", m["tools"])
	}
}

// In a stream too the search's blocks and citations are not the client's:
// no tool call, the text as it comes (chat deltas have no annotations).
func TestWebSearchStream(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"Shannon?"}],"web_search_options":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := NewChat(translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-5", WebSearch: true}, req)
	c.RequestBody() //nolint:errcheck // a valid request
	c.ResponseHeaders(200, "text/event-stream")
	events := []string{
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"shannon\"}"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.com/s","title":"S","encrypted_content":"Eq"}]}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://example.com/s","title":"S","cited_text":"born 1916"}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Born in 1916."}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":20,"server_tool_use":{"web_search_requests":1}}}`,
		`{"type":"message_stop"}`,
	}
	var sse strings.Builder
	for _, e := range events {
		sse.WriteString("event: x\ndata: " + e + "\n\n")
	}
	out, err := c.ResponseBody([]byte(sse.String()), true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "tool_calls") || !strings.Contains(string(out), `"content":"Born in 1916."`) || !strings.Contains(string(out), `"finish_reason":"stop"`) {
		t.Errorf("stream:\n%s", out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(data))
		}
	}
}

// The Messages relay reads the web searches of a message, and of a
// stream's message_delta, whose counts are cumulative; a message_delta
// without server_tool_use keeps message_start's.
func TestMessagesRelayWebSearches(t *testing.T) {
	req, err := api.ParseMessagesRequest([]byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Shannon?"}],`+
		`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMessages(translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-5"}, req)
	m.ResponseHeaders(200, "application/json")
	if _, err := m.ResponseBody([]byte(searchAnswer), true); err != nil {
		t.Fatal(err)
	}
	if got := m.Usage(); got.WebSearchRequests != 1 || got.PromptTokens != 6039 {
		t.Errorf("message usage %+v, want 1 web search", got)
	}
	start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],` +
		`"usage":{"input_tokens":10,"output_tokens":1,"server_tool_use":{"web_search_requests":1}}}}`
	for _, c := range []struct {
		name  string
		delta string
		want  int64
	}{
		{"cumulative", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":20,"server_tool_use":{"web_search_requests":2}}}`, 2},
		{"left out", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":20}}`, 1},
	} {
		m := NewMessages(translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-5"}, req)
		m.ResponseHeaders(200, "text/event-stream")
		stream := "event: message_start\ndata: " + start + "\n\nevent: message_delta\ndata: " + c.delta + "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		if _, err := m.ResponseBody([]byte(stream), true); err != nil {
			t.Fatal(err)
		}
		if got := m.Usage(); got.WebSearchRequests != c.want || got.CompletionTokens != 20 {
			t.Errorf("%s: stream usage %+v, want %d web searches", c.name, got, c.want)
		}
	}
}
