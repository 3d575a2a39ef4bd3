package openai

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

func runQuirkStream(t testing.TB, q Quirks, body string, chunks [][]byte) ([]byte, translate.Usage) {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	tr := NewCompatibleChat(q)(translate.Target{Model: "m"}, req)
	tr.ResponseHeaders(200, "text/event-stream")
	var out []byte
	for _, c := range chunks {
		b, _ := tr.ResponseBody(c, false)
		out = append(out, b...)
	}
	b, _ := tr.ResponseBody(nil, true)
	return append(out, b...), tr.Usage()
}

func TestQuirksRequest(t *testing.T) {
	req, _ := api.ParseChatRequest([]byte(`{"model":"x","stream":true,"max_completion_tokens":9,"store":true,
		"messages":[{"role":"developer","content":"d"},{"role":"user","content":"u"}]}`))
	up, err := NewCompatibleChat(CompatibleProviders()["mistral"])(translate.Target{Model: "mistral-large-latest"}, req).RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(up.Body, &got)
	want := map[string]any{"model": "mistral-large-latest", "stream": true, "max_tokens": 9.0,
		"messages": []any{map[string]any{"role": "system", "content": "d"}, map[string]any{"role": "user", "content": "u"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mistral upstream (-want +got):\n%s", diff)
	}
	if _, ok := CompatibleProviders()["groq"]; !ok {
		t.Error("groq is missing from the compatible providers")
	}
}

// Mistral streams thinking as typed content parts and reports usage on its
// last content chunk; clients get OpenAI's shapes.
func TestMistralThinkingStream(t *testing.T) {
	up := translatetest.ReadFile(t, "../../testdata/fixtures/mistral/test_mistral_model_thinking_part_iter.bodies/00.response.sse")
	out, usage := runQuirkStream(t, CompatibleProviders()["mistral"], streamReq+`,"stream_options":{"include_usage":true}}`, [][]byte{up})
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
	if !bytes.Contains(out, []byte(`"reasoning_content":"Okay"`)) || usage.TotalTokens != 242 {
		t.Errorf("usage %+v; want reasoning deltas", usage)
	}
	events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
	if n := len(events); !strings.Contains(events[n-2], `"choices":[],`) || !strings.Contains(events[n-2], `"usage":{`) ||
		strings.Contains(events[n-3], `"usage"`) {
		t.Errorf("want the usage split into its own chunk before [DONE]:\n%s\n%s", events[n-3], events[n-2])
	}
	plain, _ := runQuirkStream(t, CompatibleProviders()["mistral"], streamReq+`}`, [][]byte{up})
	if bytes.Contains(plain, []byte(`"usage"`)) {
		t.Error("usage reached a client that did not ask for it")
	}
}

func TestRepairNullsInDeltas(t *testing.T) {
	up := "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":null,\"content\":\"hi\",\"tool_calls\":null},\"logprobs\":null,\"finish_reason\":null}]}\n\ndata: [DONE]\n\n"
	out, _ := runQuirkStream(t, CompatibleProviders()["vllm"], streamReq+`}`, [][]byte{[]byte(up)})
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
	if bytes.Contains(out, []byte(`"role":null`)) || bytes.Contains(out, []byte(`"tool_calls":null`)) || !bytes.Contains(out, []byte(`"content":"hi"`)) {
		t.Errorf("output %s", out)
	}
}

// An assistant message sent back as another provider's answer gave it
// loses the gateway's thinking_blocks on every OpenAI-family server, and
// reasoning_content where the server refuses it (OpenAI, Azure, Mistral
// answer 400 or 422 to a member they do not know); DeepSeek keeps its
// reasoning_content. Everything else of the message stays.
func TestReplayedReasoningMembers(t *testing.T) {
	const body = `{"model":"x","messages":[{"role":"user","content":"Weather?"},` +
		`{"role":"assistant","content":null,"reasoning_content":"I need the weather.","thinking_blocks":[{"type":"thinking","thinking":"I need the weather.","signature":"EqQB"}],` +
		`"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"w","arguments":"{}"}}]},{"role":"tool","tool_call_id":"toolu_1","content":"sunny"}]}`
	for name, q := range map[string]Quirks{"openai": {}, "mistral": CompatibleProviders()["mistral"], "groq": CompatibleProviders()["groq"], "deepseek": CompatibleProviders()["deepseek"]} {
		body := upstreamBody(t, q, body)
		var got struct{ Messages []map[string]json.RawMessage }
		json.Unmarshal(body, &got)
		assistant := got.Messages[1]
		_, reasoning := assistant["reasoning_content"]
		if _, thinking := assistant["thinking_blocks"]; thinking || reasoning != (name == "deepseek") || assistant["tool_calls"] == nil || len(got.Messages) != 3 {
			t.Errorf("%s: assistant message %s", name, body)
		}
	}
	// Without them the request takes the fast path, untouched but for the model.
	req, _ := api.ParseChatRequest([]byte(`{"model":"x","messages":[{"role":"user","content":"say \"reasoning_content\""}]}`))
	up, _ := NewChat(translate.Target{Model: "m"}, req).RequestBody()
	if string(up.Body) != `{"model":"m","messages":[{"role":"user","content":"say \"reasoning_content\""}]}` {
		t.Errorf("plain request became %s", up.Body)
	}
}

// Anthropic's cache_control markers reach OpenRouter and the generic
// family (which may pass them to Anthropic) and no other OpenAI-shaped
// server: removed from messages, content parts and tools, never from a
// tool's parameters; OpenAI's prompt_cache_key reaches OpenAI alone.
func TestCacheMarkersOnlyWhereTaken(t *testing.T) {
	const body = `{"model":"x","prompt_cache_key":"k","messages":[{"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}]},` +
		`{"role":"user","content":"u","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"cache_control":{"type":"string"}}}},"cache_control":{"type":"ephemeral"}}]}`
	for name, q := range map[string]Quirks{"openai": {}, "mistral": CompatibleProviders()["mistral"], "openrouter": CompatibleProviders()["openrouter"]} {
		got := string(upstreamBody(t, q, body))
		markers := strings.Count(got, `"cache_control":{"type":"ephemeral"`)
		if want := map[string]int{"openai": 0, "mistral": 0, "openrouter": 3}[name]; markers != want {
			t.Errorf("%s: %d markers, want %d: %s", name, markers, want, got)
		}
		if !strings.Contains(got, `"properties":{"cache_control":{"type":"string"}}`) {
			t.Errorf("%s: the tool's parameters changed: %s", name, got)
		}
		if strings.Contains(got, "prompt_cache_key") != (name == "openai" || name == "openrouter") {
			t.Errorf("%s: prompt_cache_key: %s", name, got)
		}
	}
}

// upstreamBody is the body a server with quirks q is sent for body.
func upstreamBody(t *testing.T, q Quirks, body string) []byte {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	up, err := NewCompatibleChat(q)(translate.Target{Model: "m"}, req).RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	return up.Body
}
