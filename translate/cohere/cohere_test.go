package cohere

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

const recorded = "../../testdata/fixtures/cohere/"

func newChat(t testing.TB, body string) *chat {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("ParseChatRequest: %v", err)
	}
	c := NewChat(translate.Target{Provider: "cohere", Model: "command-r7b-12-2024", APIKey: "co-key"}, req).(*chat)
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	return c
}

func TestRequest(t *testing.T) {
	up, err := newChat(t, `{"model":"m","max_completion_tokens":50,"top_p":0.9,"stop":"X","tool_choice":"required",
		"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"hi","name":"bob"}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
		"response_format":{"type":"json_object"}}`).RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(up.Body, &got)
	want := map[string]any{"model": "command-r7b-12-2024", "stream": false, "max_tokens": 50.0, "p": 0.9, "stop_sequences": []any{"X"},
		"tool_choice": "REQUIRED", "response_format": map[string]any{"type": "json_object"},
		"messages": []any{map[string]any{"role": "system", "content": "Be brief."}, map[string]any{"role": "user", "content": "hi"}},
		"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream (-want +got):\n%s", diff)
	}
	if up.Path != "/v2/chat" || up.Headers[1].Value != "Bearer co-key" {
		t.Errorf("path %q headers %v", up.Path, up.Headers)
	}
	for _, bad := range []string{`"tool_choice":{"type":"function","function":{"name":"f"}}`, `"n":3`} {
		if _, err := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}],`+bad+`}`).RequestBody(); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestRecordedResponses(t *testing.T) {
	for _, file := range []string{"test_request_simple_success_with_vcr.bodies/00.response.json", "test_cohere_model_instructions.bodies/00.response.json"} {
		c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
		c.ResponseHeaders(200, "application/json")
		out, err := c.ResponseBody(translatetest.ReadFile(t, recorded+file), true)
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", out)
		if c.Usage().TotalTokens == 0 || !bytes.Contains(out, []byte(`"finish_reason":"stop"`)) {
			t.Errorf("%s: usage %+v, %s", file, c.Usage(), out)
		}
	}
}

// streamEvents follow Cohere's documented v2 stream format.
const streamEvents = `event: message-start
data: {"id":"c1","type":"message-start","delta":{"message":{"role":"assistant","content":[],"tool_plan":"","tool_calls":[],"citations":[]}}}

event: content-start
data: {"type":"content-start","index":0,"delta":{"message":{"content":{"type":"text","text":""}}}}

event: content-delta
data: {"type":"content-delta","index":0,"delta":{"message":{"content":{"text":"Let me check."}}}}

event: tool-call-start
data: {"type":"tool-call-start","index":0,"delta":{"message":{"tool_calls":{"id":"get_1","type":"function","function":{"name":"get","arguments":""}}}}}

event: tool-call-delta
data: {"type":"tool-call-delta","index":0,"delta":{"message":{"tool_calls":{"function":{"arguments":"{\"city\":"}}}}}

event: tool-call-delta
data: {"type":"tool-call-delta","index":0,"delta":{"message":{"tool_calls":{"function":{"arguments":"\"Paris\"}"}}}}}

event: tool-call-end
data: {"type":"tool-call-end","index":0}

event: message-end
data: {"type":"message-end","delta":{"finish_reason":"TOOL_CALL","usage":{"billed_units":{"input_tokens":5,"output_tokens":9},"tokens":{"input_tokens":120,"output_tokens":20}}}}

`

const streamReq = `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`

func runStream(t testing.TB, chunks [][]byte) ([]byte, translate.Usage) {
	t.Helper()
	c := newChat(t, streamReq)
	c.ResponseHeaders(200, "text/event-stream")
	var out []byte
	for _, ch := range chunks {
		b, _ := c.ResponseBody(ch, false)
		out = append(out, b...)
	}
	b, _ := c.ResponseBody(nil, true)
	return append(out, b...), c.Usage()
}

func TestStream(t *testing.T) {
	out, usage := runStream(t, [][]byte{[]byte(streamEvents)})
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
	if usage != (translate.Usage{PromptTokens: 120, CompletionTokens: 20, TotalTokens: 140}) {
		t.Errorf("usage = %+v", usage)
	}
	var args strings.Builder
	for _, ev := range strings.Split(strings.TrimSpace(string(out)), "\n\n") {
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
				}
			}
		}
		json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch)
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if args.String() != `{"city":"Paris"}` || !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
		t.Errorf("arguments %q, output %s", args.String(), out)
	}
	cut, _ := runStream(t, [][]byte{[]byte(streamEvents[:400])})
	if !bytes.Contains(cut, []byte(`data: {"error":{`)) || bytes.Contains(cut, []byte("[DONE]")) {
		t.Errorf("cut stream output %s", cut)
	}
}

func TestErrors(t *testing.T) {
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	head := c.ResponseHeaders(404, "application/json")
	out, _ := c.ResponseBody(translatetest.ReadFile(t, recorded+"TestCohere.test_embed_error.bodies/00.response.json"), true)
	spec.ValidateT(t, "ErrorResponse", out)
	if head.Status != 404 || !bytes.Contains(out, []byte("model 'nonexistent' not found")) {
		t.Errorf("%d %s", head.Status, out)
	}
	c = newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if head := c.ResponseHeaders(401, "application/json"); head.Status != 502 {
		t.Errorf("401 from the provider = %d, want 502", head.Status)
	}
	if out, _ := c.ResponseBody([]byte(`{"message":"invalid api token co-key"}`), true); bytes.Contains(out, []byte("co-key")) {
		t.Errorf("provider key leaked: %s", out)
	}
}

func TestStreamAnySplit(t *testing.T) {
	whole, _ := runStream(t, [][]byte{[]byte(streamEvents)})
	r := rand.New(rand.NewPCG(8, 9))
	for range 20 {
		if got, _ := runStream(t, translatetest.RandomChunks(r, []byte(streamEvents), 40)); !bytes.Equal(whole, got) {
			t.Fatal("split output differs")
		}
	}
}

func FuzzStreamSplit(f *testing.F) {
	f.Add([]byte(streamEvents), uint64(1))
	f.Add([]byte("data: {\"type\":\"message-end\",\"delta\":{\"error\":\"boom\"}}\r\n\r\n"), uint64(2))
	f.Fuzz(func(t *testing.T, up []byte, seed uint64) {
		whole, _ := runStream(t, [][]byte{up})
		got, _ := runStream(t, translatetest.RandomChunks(rand.New(rand.NewPCG(seed, seed)), up, 40))
		if !bytes.Equal(whole, got) {
			t.Fatalf("split output differs\nwhole %q\nsplit %q", whole, got)
		}
	})
}

func BenchmarkStreamChunk(b *testing.B) {
	ev := []byte("event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\" world\"}}}}\n\n")
	c := newChat(b, streamReq)
	c.ResponseHeaders(200, "text/event-stream")
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := c.ResponseBody(ev, false); len(out) == 0 {
			b.Fatal("no output")
		}
	}
}

func TestReasoningEffort(t *testing.T) {
	up, err := newChat(t, `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"x"}]}`).RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(up.Body, &got)
	if th := got["thinking"].(map[string]any); th["type"] != "enabled" || th["token_budget"] != 2048.0 {
		t.Errorf("thinking = %v", th)
	}
	if _, err := newChat(t, `{"model":"m","reasoning_effort":"ultra","messages":[{"role":"user","content":"x"}]}`).RequestBody(); err == nil {
		t.Error("an unknown effort was accepted")
	}
}
