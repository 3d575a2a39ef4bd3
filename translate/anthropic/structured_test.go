package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

func TestStructuredOutputs(t *testing.T) {
	for model, want := range map[string]bool{
		"claude-sonnet-4-5":                            true,
		"claude-sonnet-4-5-20250929":                   true,
		"claude-haiku-4-5":                             true,
		"claude-opus-4-6":                              true,
		"claude-opus-4-7@20260101":                     true,
		"us.anthropic.claude-sonnet-4-5-20250929-v1:0": true,
		"anthropic.claude-opus-5":                      true,
		"claude-sonnet-4-20250514":                     false, // the date is not a minor version
		"claude-opus-4-1":                              false,
		"claude-3-7-sonnet-20250219":                   false,
		"claude-3-5-haiku-latest":                      false,
		"claude-fable-5":                               false,
		"us.anthropic.claude-3-5-sonnet-20241022-v2:0": false,
		"gpt-4o":                       false,
		"claude-sonnet-latest":         false,
		"claude-sonnet-4-5-mock-agent": true,
		"us.anthropic.claude-sonnet-4-5-mock-agent-v1:0": true,
	} {
		if got := StructuredOutputs(model); got != want {
			t.Errorf("StructuredOutputs(%q) = %v, want %v", model, got, want)
		}
	}
}

func TestStrictSchema(t *testing.T) {
	got := string(StrictSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}},` +
		`"c":{"type":"array","items":{"type":"object"}},"d":{"type":"object","additionalProperties":true}},"$defs":{"e":{"properties":{}}}}`)))
	want := `{"$defs":{"e":{"additionalProperties":false,"properties":{}}},"additionalProperties":false,"properties":{"a":{"additionalProperties":false,"properties":{"b":{"type":"string"}},"type":"object"},` +
		`"c":{"items":{"additionalProperties":false,"type":"object"},"type":"array"},"d":{"additionalProperties":true,"type":"object"}},"type":"object"}`
	if got != want {
		t.Errorf("StrictSchema:\n got %s\nwant %s", got, want)
	}
	if got := string(StrictSchema(json.RawMessage(`{not json`))); got != `{not json` {
		t.Errorf("a schema that is not JSON became %s", got)
	}
}

// On a model with structured outputs a JSON schema goes as output_config
// and the client's tools, tool choice and thinking stay as they are: a
// tool loop with reasoning can end in a JSON answer, which comes back as
// the message content. json_object (no schema) and models without
// structured outputs keep the forced tool, and Vertex AI always does.
func TestNativeJSONWithToolsAndThinking(t *testing.T) {
	const body = `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"Weather?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}}}}`
	translator := func(model string, build func(translate.Target, *api.ChatRequest) translate.Translator, body string) (map[string]any, error) {
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		up, err := build(translate.Target{Provider: "anthropic", Model: model}, req).RequestBody()
		if err != nil {
			return nil, err
		}
		var m map[string]any
		json.Unmarshal(up.Body, &m)
		return m, nil
	}
	m, err := translator("claude-sonnet-4-5", NewChat, body)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustMarshal(m["output_config"]); got != `{"format":{"schema":{"additionalProperties":false,"properties":{"summary":{"type":"string"}},"required":["summary"],"type":"object"},"type":"json_schema"}}` {
		t.Errorf("output_config %s", got)
	}
	if tools := mustMarshal(m["tools"]); strings.Contains(tools, jsonTool) || m["tool_choice"] != nil || m["thinking"] == nil {
		t.Errorf("tools %s, tool_choice %v, thinking %v: want the client's tool alone, no forced choice, thinking on", tools, m["tool_choice"], m["thinking"])
	}

	c := NewChat(translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-5"}, mustParse(t, body))
	c.RequestBody() //nolint:errcheck // checked above
	c.ResponseHeaders(200, "application/json")
	out, err := c.ResponseBody([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"{\"summary\":\"sunny\"}"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`), true)
	if err != nil || !strings.Contains(string(out), `"content":"{\"summary\":\"sunny\"}"`) || !strings.Contains(string(out), `"finish_reason":"stop"`) {
		t.Errorf("answer %s %v: want the JSON text as content", out, err)
	}

	for _, tt := range []struct {
		model string
		build func(translate.Target, *api.ChatRequest) translate.Translator
		body  string
	}{
		{"claude-sonnet-4-20250514", NewChat, body},
		{"claude-sonnet-4-5", NewChatToolJSON, body},
		{"claude-sonnet-4-5", NewChat, strings.Replace(body, `"type":"json_schema"`, `"type":"json_object"`, 1)},
	} {
		if _, err := translator(tt.model, tt.build, tt.body); err == nil || !strings.Contains(err.Error(), "only without reasoning_effort") {
			t.Errorf("%s: %v, want the forced tool's refusal of reasoning", tt.model, err)
		}
		m, err := translator(tt.model, tt.build, strings.Replace(tt.body, `"reasoning_effort":"low",`, "", 1))
		if err != nil || m["output_config"] != nil || !strings.Contains(mustMarshal(m["tools"]), jsonTool) {
			t.Errorf("%s without reasoning: %v %v, want the forced tool", tt.model, m, err)
		}
	}
}

func mustParse(t *testing.T, body string) *api.ChatRequest {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
