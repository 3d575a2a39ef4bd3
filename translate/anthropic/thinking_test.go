package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate/api/spec"
)

// signedAnswer is Claude calling a tool after thinking, as the Messages
// API documents extended thinking with tool use: the thinking block with
// its signature, then the tool_use.
const signedAnswer = `{"id":"msg_t1","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"thinking","thinking":"I need the weather first.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},` +
	`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},` +
	`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":60}}`

const thinkingTools = `"reasoning_effort":"low","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`

// A tool loop with thinking on continues: the thinking the client got in
// thinking_blocks, sent back with the assistant turn, reaches Claude
// first in that turn, with its signature; without it the gateway turns
// thinking off for the request rather than send a turn Claude refuses.
func TestThinkingRoundTrip(t *testing.T) {
	first := newChat(t, `{"model":"m",`+thinkingTools+`,"messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	if _, err := first.RequestBody(); err != nil {
		t.Fatal(err)
	}
	first.ResponseHeaders(200, "application/json")
	out, err := first.ResponseBody([]byte(signedAnswer), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	var cc struct {
		Choices []struct{ Message json.RawMessage }
	}
	json.Unmarshal(out, &cc)
	assistant := cc.Choices[0].Message
	if !strings.Contains(string(assistant), `"thinking_blocks":[{"type":"thinking","thinking":"I need the weather first.","signature":"EqQB`) ||
		!strings.Contains(string(assistant), `{"type":"redacted_thinking","data":"EmwK`) {
		t.Fatalf("message %s: want its thinking blocks, signed", assistant)
	}

	next := func(assistant string) map[string]any {
		c := newChat(t, `{"model":"m",`+thinkingTools+`,"messages":[{"role":"user","content":"Weather in Paris?"},`+assistant+
			`,{"role":"tool","tool_call_id":"toolu_1","content":"18C, sunny"}]}`)
		up, err := c.RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.Unmarshal(up.Body, &body)
		return body
	}
	body := next(string(assistant))
	turn := body["messages"].([]any)[1].(map[string]any)["content"].([]any)
	var types []string
	for _, b := range turn {
		types = append(types, b.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "thinking,redacted_thinking,tool_use" || turn[0].(map[string]any)["signature"] == nil || body["thinking"] == nil {
		t.Errorf("assistant turn %v, thinking %v: want the signed thinking first, thinking on", turn, body["thinking"])
	}

	// The client dropped the thinking: thinking off, never a made-up one.
	var bare map[string]any
	json.Unmarshal(assistant, &bare)
	delete(bare, "thinking_blocks")
	b, _ := json.Marshal(bare)
	body = next(string(b))
	if body["thinking"] != nil || strings.Contains(mustMarshal(body), `"type":"thinking"`) {
		t.Errorf("without the thinking: %v", body)
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
