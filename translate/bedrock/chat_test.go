package bedrock

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

const recorded = "../../testdata/fixtures/bedrock/"

func newChat(t testing.TB, body string) *chat {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("ParseChatRequest: %v", err)
	}
	c := NewChat(translate.Target{Provider: "bedrock", Model: "us.amazon.nova-micro-v1:0", APIKey: "br-key"}, req).(*chat)
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	return c
}

func TestRequest(t *testing.T) {
	c := newChat(t, `{"model":"m","max_tokens":20,"stop":["Z"],"tool_choice":{"type":"function","function":{"name":"get"}},
		"messages":[{"role":"system","content":"You are a chatbot."},{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
		{"role":"assistant","tool_calls":[{"id":"tu1","type":"function","function":{"name":"get","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"tu1","content":"21C"}],
		"tools":[{"type":"function","function":{"name":"get","description":"d","parameters":{"type":"object"}}}]}`)
	up, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(up.Body, &got)
	want := map[string]any{
		"system":          []any{map[string]any{"text": "You are a chatbot."}},
		"inferenceConfig": map[string]any{"maxTokens": 20.0, "stopSequences": []any{"Z"}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"text": "Hi"},
				map[string]any{"image": map[string]any{"format": "png", "source": map[string]any{"bytes": "iVBORw0KGgo="}}}}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"toolUse": map[string]any{"toolUseId": "tu1", "name": "get", "input": map[string]any{"city": "Paris"}}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"toolResult": map[string]any{"toolUseId": "tu1", "content": []any{map[string]any{"text": "21C"}}}}}},
		},
		"toolConfig": map[string]any{"tools": []any{map[string]any{"toolSpec": map[string]any{"name": "get", "description": "d", "inputSchema": map[string]any{"json": map[string]any{"type": "object"}}}}},
			"toolChoice": map[string]any{"tool": map[string]any{"name": "get"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream (-want +got):\n%s", diff)
	}
	if up.Path != "/model/us.amazon.nova-micro-v1%3A0/converse" || up.Headers[1].Value != "Bearer br-key" {
		t.Errorf("path %q headers %v", up.Path, up.Headers)
	}
}

func TestRecordedConverse(t *testing.T) {
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"Hello!"}]}`)
	c.ResponseHeaders(200, "application/json")
	out, err := c.ResponseBody(translatetest.ReadFile(t, recorded+"test_bedrock_model.bodies/00.response.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	if !bytes.Contains(out, []byte(`"content":"Hello! How can I assist you today?`)) || c.Usage() != (translate.Usage{PromptTokens: 7, CompletionTokens: 30, TotalTokens: 37}) {
		t.Errorf("usage %+v: %s", c.Usage(), out)
	}
}

const streamReq = `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`

func runStream(t testing.TB, chunks [][]byte) ([]byte, translate.Usage) {
	t.Helper()
	c := newChat(t, streamReq)
	c.ResponseHeaders(200, "application/vnd.amazon.eventstream")
	var out []byte
	for _, ch := range chunks {
		b, _ := c.ResponseBody(ch, false)
		out = append(out, b...)
	}
	b, _ := c.ResponseBody(nil, true)
	return append(out, b...), c.Usage()
}

func TestRecordedStreams(t *testing.T) {
	for _, tt := range []struct {
		file, finish string
		usage        translate.Usage
	}{
		{"test_bedrock_model_stream.bodies/00.response.eventstream.bin", "stop", translate.Usage{}},
		{"test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin", "tool_calls", translate.Usage{PromptTokens: 471, CompletionTokens: 91, TotalTokens: 562}},
		{"test_bedrock_model_thinking_part_stream.bodies/00.response.eventstream.bin", "stop", translate.Usage{}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			out, usage := runStream(t, [][]byte{translatetest.ReadFile(t, recorded+tt.file)})
			spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) || !bytes.Contains(out, []byte(`"finish_reason":"`+tt.finish+`"`)) || usage.TotalTokens == 0 {
				t.Errorf("usage %+v, tail %q", usage, out[max(0, len(out)-400):])
			}
			if tt.usage.TotalTokens > 0 && usage != tt.usage {
				t.Errorf("usage = %+v, want %+v", usage, tt.usage)
			}
		})
	}
	out, _ := runStream(t, [][]byte{translatetest.ReadFile(t, recorded+"test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin")})
	if !bytes.Contains(out, []byte(`"name":"get_temperature"`)) || !bytes.Contains(out, []byte(`"arguments":"{\"city\":\"Paris\"}"`)) {
		t.Errorf("tool call deltas missing: %s", out)
	}
}

func TestErrors(t *testing.T) {
	for _, file := range []string{"test_bedrock_error.bodies/00.response.json", "test_bedrock_streaming_error.bodies/00.response.json"} {
		c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
		head := c.ResponseHeaders(400, "application/json")
		out, _ := c.ResponseBody(translatetest.ReadFile(t, recorded+file), true)
		spec.ValidateT(t, "ErrorResponse", out)
		if head.Status != 400 || !bytes.Contains(out, []byte("The provided model identifier is invalid.")) {
			t.Errorf("%s: %d %s", file, head.Status, out)
		}
	}
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if head := c.ResponseHeaders(403, "application/json"); head.Status != 502 {
		t.Errorf("403 → %d, want 502", head.Status)
	}
	data := translatetest.ReadFile(t, recorded+"test_bedrock_model_stream.bodies/00.response.eventstream.bin")
	cut, _ := runStream(t, [][]byte{data[:len(data)/2]})
	corrupt := append([]byte(nil), data...)
	corrupt[20] ^= 0xff
	bad, _ := runStream(t, [][]byte{corrupt})
	for name, out := range map[string][]byte{"cut": cut, "corrupt": bad} {
		events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
		if !strings.HasPrefix(events[len(events)-1], `data: {"error":{`) || bytes.Contains(out, []byte("[DONE]")) {
			t.Errorf("%s stream: %q", name, out)
		}
	}
}

func TestStreamAnySplit(t *testing.T) {
	data := translatetest.ReadFile(t, recorded+"test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin")
	whole, _ := runStream(t, [][]byte{data})
	r := rand.New(rand.NewPCG(2, 2))
	for range 20 {
		var chunks [][]byte
		for rest := data; len(rest) > 0; {
			n := 1 + r.IntN(min(len(rest), 80))
			chunks, rest = append(chunks, rest[:n]), rest[n:]
		}
		if got, _ := runStream(t, chunks); !bytes.Equal(whole, got) {
			t.Fatal("split output differs")
		}
	}
}

func BenchmarkStreamFrame(b *testing.B) {
	one := firstDeltaFrame(b, translatetest.ReadFile(b, recorded+"test_bedrock_model_stream.bodies/00.response.eventstream.bin"))
	c := newChat(b, streamReq)
	c.ResponseHeaders(200, "application/vnd.amazon.eventstream")
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := c.ResponseBody(one, false); len(out) == 0 {
			b.Fatal("no output")
		}
	}
}

// firstDeltaFrame returns the bytes of the first contentBlockDelta frame.
func firstDeltaFrame(b *testing.B, data []byte) []byte {
	for off := 0; off < len(data); {
		total := int(data[off])<<24 | int(data[off+1])<<16 | int(data[off+2])<<8 | int(data[off+3])
		var d Decoder
		msgs, _ := d.Feed(data[off : off+total])
		if len(msgs) == 1 && msgs[0].Header(":event-type") == "contentBlockDelta" {
			return data[off : off+total]
		}
		off += total
	}
	b.Fatal("no delta frame")
	return nil
}

func TestReasoningAndResponseFormat(t *testing.T) {
	claude := newChat(t, `{"model":"m","reasoning_effort":"medium","messages":[{"role":"user","content":"x"}]}`)
	claude.target.Model = "us.anthropic.claude-sonnet-4-20250514-v1:0"
	up, err := claude.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(up.Body, &got)
	thinking := got["additionalModelRequestFields"].(map[string]any)["thinking"].(map[string]any)
	if thinking["budget_tokens"] != 8192.0 || got["inferenceConfig"].(map[string]any)["maxTokens"] != 8192.0+4096 {
		t.Errorf("upstream = %v", got)
	}
	if _, err := newChat(t, `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"x"}]}`).RequestBody(); err == nil {
		t.Error("reasoning_effort on a non-Claude model was accepted")
	}
	c := newChat(t, `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`)
	if _, err := c.RequestBody(); err != nil {
		t.Fatal(err)
	}
	c.ResponseHeaders(200, "application/json")
	out, _ := c.ResponseBody([]byte(`{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"json_response","input":{"a":1}}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5}}`), true)
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	if !bytes.Contains(out, []byte(`"content":"{\"a\":1}"`)) || !bytes.Contains(out, []byte(`"finish_reason":"stop"`)) {
		t.Errorf("output %s", out)
	}

	// With the client's tools the answer is one tool more, which the
	// model must call when it calls no other.
	w := newChat(t, `{"model":"m","response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`)
	up, err = w.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		ToolConfig struct {
			Tools      []struct{ ToolSpec struct{ Name string } }
			ToolChoice map[string]any
		}
	}
	json.Unmarshal(up.Body, &sent)
	if tc := sent.ToolConfig; len(tc.Tools) != 2 || tc.Tools[1].ToolSpec.Name != "json_response" || tc.ToolChoice["any"] == nil {
		t.Errorf("sent %s", up.Body)
	}
	w.ResponseHeaders(200, "application/json")
	out, _ = w.ResponseBody([]byte(`{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"f","input":{}}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5}}`), true)
	if !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) {
		t.Errorf("a call of the client's tool: %s", out)
	}
}

// A request signed with SigV4 is the same request when RequestBody is
// called again at the same time: the signature covers only the request
// and the clock (the providers package checks the rest of its purity).
func TestSignedRequestBodyIsRepeatable(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := NewChat(translate.Target{Provider: "bedrock", Model: "anthropic.claude-sonnet-4", Host: "bedrock-runtime.us-east-1.amazonaws.com",
		AWS: translate.AWSCredentials{AccessKeyID: "AKID", SecretAccessKey: "secret", SessionToken: "token"}}, req).(*chat)
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	first, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	second, _ := c.RequestBody()
	if d := cmp.Diff(first, second); d != "" {
		t.Errorf("signed twice (-first +second):\n%s", d)
	}
	if len(first.Headers) < 4 || c.MaxOutputTokens() != 2048+4096 {
		t.Errorf("headers %v, bound %d: want a signed request with the thinking budget's bound", first.Headers, c.MaxOutputTokens())
	}
}
