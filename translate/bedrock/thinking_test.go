package bedrock

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

func claudeChat(t *testing.T, body string) *chat {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	c := NewChat(translate.Target{Provider: "bedrock", Model: "us.anthropic.claude-sonnet-4-20250514-v1:0", APIKey: "br-key"}, req).(*chat)
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	return c
}

const bedrockTools = `"reasoning_effort":"low","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`

// Claude's reasoning on Bedrock round-trips as on Anthropic: signed in the
// message's thinking_blocks, and back first in its assistant turn as
// reasoningContent; without it the request goes without thinking.
func TestReasoningRoundTrip(t *testing.T) {
	first := claudeChat(t, `{"model":"m",`+bedrockTools+`,"messages":[{"role":"user","content":"Weather?"}]}`)
	if _, err := first.RequestBody(); err != nil {
		t.Fatal(err)
	}
	first.ResponseHeaders(200, "application/json")
	out, err := first.ResponseBody([]byte(`{"output":{"message":{"role":"assistant","content":[`+
		`{"reasoningContent":{"reasoningText":{"text":"I need the weather.","signature":"sig-1"}}},`+
		`{"reasoningContent":{"redactedContent":"aGlkZGVu"}},`+
		`{"toolUse":{"toolUseId":"t1","name":"get_weather","input":{}}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	var cc struct {
		Choices []struct{ Message json.RawMessage }
	}
	json.Unmarshal(out, &cc)
	assistant := string(cc.Choices[0].Message)
	if !strings.Contains(assistant, `"thinking_blocks":[{"type":"thinking","thinking":"I need the weather.","signature":"sig-1"},{"type":"redacted_thinking","data":"aGlkZGVu"}]`) {
		t.Fatalf("message %s", assistant)
	}
	next := func(assistant string) map[string]any {
		c := claudeChat(t, `{"model":"m",`+bedrockTools+`,"messages":[{"role":"user","content":"Weather?"},`+assistant+
			`,{"role":"tool","tool_call_id":"t1","content":"18C"}]}`)
		up, err := c.RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.Unmarshal(up.Body, &body)
		return body
	}
	body := next(assistant)
	turn, _ := json.Marshal(body["messages"].([]any)[1])
	if !strings.HasPrefix(string(turn), `{"content":[{"reasoningContent":{"reasoningText":{"signature":"sig-1","text":"I need the weather."}}},{"reasoningContent":{"redactedContent":"aGlkZGVu"}},{"toolUse"`) ||
		body["additionalModelRequestFields"] == nil {
		t.Errorf("assistant turn %s, fields %v", turn, body["additionalModelRequestFields"])
	}
	var bare map[string]any
	json.Unmarshal([]byte(assistant), &bare)
	delete(bare, "thinking_blocks")
	b, _ := json.Marshal(bare)
	body = next(string(b))
	if sent, _ := json.Marshal(body); body["additionalModelRequestFields"] != nil || strings.Contains(string(sent), "reasoningContent") {
		t.Errorf("without the reasoning: %s", sent)
	}
}
