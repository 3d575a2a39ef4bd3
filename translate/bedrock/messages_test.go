package bedrock

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

// count_tokens to Claude on Bedrock: CountTokens for the foundation id
// with the InvokeModel body base64 in input.invokeModel.body; its count
// comes back as the Messages API's, its errors in the Messages API's
// shape; other models are not counted by Bedrock.
func TestCountTokens(t *testing.T) {
	r, err := api.ParseMessagesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if NewCountTokens(translate.Target{Model: "us.amazon.nova-micro-v1:0"}, r) != nil {
		t.Error("Nova counted by Bedrock")
	}
	c := NewCountTokens(translate.Target{Model: "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", APIKey: "k"}, r)
	up, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Input struct {
			InvokeModel struct{ Body string } `json:"invokeModel"`
		} `json:"input"`
	}
	json.Unmarshal(up.Body, &body)
	invoke, _ := base64.StdEncoding.DecodeString(body.Input.InvokeModel.Body)
	if up.Path != "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens" ||
		!strings.Contains(string(invoke), `"anthropic_version":"bedrock-2023-05-31"`) || !strings.Contains(string(invoke), `"max_tokens":1`) ||
		strings.Contains(string(invoke), `"model"`) {
		t.Errorf("upstream %s %s (invoke body %s)", up.Path, up.Body, invoke)
	}
	c.ResponseHeaders(200, "application/json")
	if out, err := c.ResponseBody([]byte(`{"inputTokens":42}`), true); err != nil || string(out) != `{"input_tokens":42}` {
		t.Errorf("count: %s %v", out, err)
	}
	if u := c.Usage(); u.PromptTokens != 42 || u.TotalTokens != 42 { // charged to token limits
		t.Errorf("usage of a count of 42: %+v", u)
	}
	c = NewCountTokens(translate.Target{Model: "anthropic.claude-x"}, r)
	c.RequestBody() //nolint:errcheck // a valid request
	c.ResponseHeaders(400, "application/json")
	out, _ := c.ResponseBody([]byte(`{"message":"The provided model doesn't support counting tokens."}`), true)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if json.Unmarshal(out, &e) != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" ||
		e.Error.Message != "The provided model doesn't support counting tokens." {
		t.Errorf("error: %s", out)
	}
}

// Claude on Bedrock reports web searches in the Anthropic body as
// Anthropic does: InvokeModel's message and its stream's message_delta
// (in a chunk frame) give the usage's web searches.
func TestMessagesWebSearches(t *testing.T) {
	r, err := api.ParseMessagesRequest([]byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	target := translate.Target{Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", APIKey: "k"}
	m := NewMessages(target, r)
	m.ResponseHeaders(200, "application/json")
	msg := `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn",` +
		`"usage":{"input_tokens":10,"output_tokens":5,"server_tool_use":{"web_search_requests":2}}}`
	if _, err := m.ResponseBody([]byte(msg), true); err != nil || m.Usage().WebSearchRequests != 2 {
		t.Errorf("message: usage %+v (%v), want 2 web searches", m.Usage(), err)
	}
	chunk := func(event string) []byte {
		return eventFrame("chunk", `{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(event))+`"}`)
	}
	m = NewMessages(target, r)
	m.ResponseHeaders(200, "application/vnd.amazon.eventstream")
	var stream []byte
	stream = append(stream, chunk(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`)...)
	stream = append(stream, chunk(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5,"server_tool_use":{"web_search_requests":3}}}`)...)
	stream = append(stream, chunk(`{"type":"message_stop"}`)...)
	if _, err := m.ResponseBody(stream, true); err != nil || m.Usage().WebSearchRequests != 3 || m.Usage().PromptTokens != 10 {
		t.Errorf("stream: usage %+v (%v), want 3 web searches", m.Usage(), err)
	}
}

// Claude on Bedrock's answer names the model the client asked for, in
// the message and the stream's message_start, the rest as Bedrock sent
// it; a message without a model is left without one.
func TestMessagesModelIsTheClients(t *testing.T) {
	r, err := api.ParseMessagesRequest([]byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	target := translate.Target{Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", APIKey: "k"}
	const msg = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`
	for in, want := range map[string]string{
		msg: strings.Replace(msg, "claude-sonnet-4-5-20250929", "claude-sonnet-4-5", 1),
		strings.Replace(msg, `"model":"claude-sonnet-4-5-20250929",`, "", 1): strings.Replace(msg, `"model":"claude-sonnet-4-5-20250929",`, "", 1),
	} {
		m := NewMessages(target, r)
		m.ResponseHeaders(200, "application/json")
		if out, err := m.ResponseBody([]byte(in), true); err != nil || string(out) != want {
			t.Errorf("message %s\n got %s (%v)\nwant %s", in, out, err, want)
		}
	}
	chunk := func(event string) []byte {
		return eventFrame("chunk", `{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(event))+`"}`)
	}
	m := NewMessages(target, r)
	m.ResponseHeaders(200, "application/vnd.amazon.eventstream")
	var stream []byte
	stream = append(stream, chunk(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`)...)
	stream = append(stream, chunk(`{"type":"message_stop"}`)...)
	out, err := m.ResponseBody(stream, true)
	want := "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}` +
		"\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	if err != nil || string(out) != want {
		t.Errorf("stream\n got %s (%v)\nwant %s", out, err, want)
	}
}
