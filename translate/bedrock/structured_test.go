package bedrock

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Claude 4.5 and later on Bedrock answer a JSON schema through
// outputConfig.textFormat (the schema as a JSON string, its objects
// closed), beside the client's tools and thinking; other models keep the
// forced tool.
func TestNativeJSON(t *testing.T) {
	const body = `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"Weather?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"summary":{"type":"string"}}}}}}`
	build := func(model, body string) (map[string]any, error) {
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		up, err := NewChat(translate.Target{Provider: "bedrock", Model: model}, req).RequestBody()
		if err != nil {
			return nil, err
		}
		var m map[string]any
		json.Unmarshal(up.Body, &m)
		return m, nil
	}
	m, err := build("us.anthropic.claude-sonnet-4-5-20250929-v1:0", body)
	if err != nil {
		t.Fatal(err)
	}
	oc, _ := json.Marshal(m["outputConfig"])
	if string(oc) != `{"textFormat":{"structure":{"jsonSchema":{"name":"w","schema":"{\"additionalProperties\":false,\"properties\":{\"summary\":{\"type\":\"string\"}},\"type\":\"object\"}"}},"type":"json_schema"}}` {
		t.Errorf("outputConfig %s", oc)
	}
	tc, _ := json.Marshal(m["toolConfig"])
	if strings.Contains(string(tc), jsonTool) || strings.Contains(string(tc), "toolChoice") || m["additionalModelRequestFields"] == nil {
		t.Errorf("toolConfig %s, thinking %v: want the client's tool alone and thinking on", tc, m["additionalModelRequestFields"])
	}

	if _, err := build("us.anthropic.claude-sonnet-4-20250514-v1:0", body); err == nil || !strings.Contains(err.Error(), "only without reasoning_effort") {
		t.Errorf("Claude Sonnet 4 with reasoning: %v, want the forced tool's refusal", err)
	}
	m, err = build("us.amazon.nova-micro-v1:0", strings.Replace(body, `"reasoning_effort":"low",`, "", 1))
	if tc, _ := json.Marshal(m["toolConfig"]); err != nil || m["outputConfig"] != nil || !strings.Contains(string(tc), jsonTool) {
		t.Errorf("Nova: %v %v, want the forced tool", m, err)
	}
}
