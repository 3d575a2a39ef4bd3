package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
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

const recorded = "../../testdata/fixtures/anthropic/"

func newChat(t testing.TB, body string) *chat {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("ParseChatRequest: %v", err)
	}
	c := NewChat(translate.Target{Provider: "anthropic", Model: "claude-x", APIKey: "sk-ant"}, req).(*chat)
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	return c
}

func upstreamBody(t *testing.T, body string) map[string]any {
	t.Helper()
	up, err := newChat(t, body).RequestBody()
	if err != nil {
		t.Fatalf("RequestBody: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(up.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRequestTranslation(t *testing.T) {
	got := upstreamBody(t, `{"model":"m","max_completion_tokens":300,"temperature":0.5,"stop":"END","user":"u1",
		"messages":[
		{"role":"system","content":"Be brief."},
		{"role":"developer","content":[{"type":"text","text":"Use tools."}]},
		{"role":"user","content":[{"type":"text","text":"Who?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},
			{"id":"t2","type":"function","function":{"name":"f","arguments":""}}]},
		{"role":"tool","tool_call_id":"t1","content":"one"},
		{"role":"tool","tool_call_id":"t2","content":"two"}],
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],
		"tool_choice":"required","parallel_tool_calls":false}`)
	want := map[string]any{
		"model": "claude-x", "system": "Be brief.\n\nUse tools.", "max_tokens": 300.0, "temperature": 0.5,
		"stop_sequences": []any{"END"}, "metadata": map[string]any{"user_id": "u1"},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "Who?"},
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBO"}}}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "tool_use", "id": "t1", "name": "f", "input": map[string]any{"a": 1.0}},
				map[string]any{"type": "tool_use", "id": "t2", "name": "f", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": []any{map[string]any{"type": "text", "text": "one"}}},
				map[string]any{"type": "tool_result", "tool_use_id": "t2", "content": []any{map[string]any{"type": "text", "text": "two"}}}}},
		},
		"tools":       []any{map[string]any{"name": "f", "description": "d", "input_schema": map[string]any{"type": "object"}}},
		"tool_choice": map[string]any{"type": "any", "disable_parallel_tool_use": true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream body (-want +got):\n%s", diff)
	}
}

func TestRequestDefaultsAndThinking(t *testing.T) {
	got := upstreamBody(t, `{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"low","temperature":0.2,"stream":true}`)
	if got["max_tokens"] != float64(DefaultMaxTokens) || got["temperature"] != nil || got["stream"] != true {
		t.Errorf("body = %v", got)
	}
	if th := got["thinking"].(map[string]any); th["budget_tokens"] != 2048.0 {
		t.Errorf("thinking = %v", th)
	}
	up, _ := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`).RequestBody()
	wantHeaders := []translate.Header{{Name: "content-type", Value: "application/json"}, {Name: "anthropic-version", Value: Version}, {Name: "x-api-key", Value: "sk-ant"}}
	if diff := cmp.Diff(wantHeaders, up.Headers); diff != "" || up.Path != "/v1/messages" {
		t.Errorf("path %q headers (-want +got):\n%s", up.Path, diff)
	}
}

func TestRequestRejections(t *testing.T) {
	for name, body := range map[string]string{
		"n > 1":          `{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`,
		"only system":    `{"model":"m","messages":[{"role":"system","content":"x"}]}`,
		"bad image url":  `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`,
		"audio part":     `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`,
		"bad arguments":  `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{oops"}}]}]}`,
		"bad effort":     `{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"}`,
		"bad toolchoice": `{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newChat(t, body).RequestBody()
			var re *api.RequestError
			if !errors.As(err, &re) || re.Message == "" {
				t.Errorf("error = %v, want a *api.RequestError", err)
			}
		})
	}
}

func TestRecordedMessages(t *testing.T) {
	tests := []struct {
		file, finish, text string
		tools              int
		usage              translate.Usage
	}{
		{"test_multiple_parallel_tool_calls.bodies/00.response.json", "tool_calls", "I'll help you find out", 4,
			translate.Usage{PromptTokens: 423, CompletionTokens: 202, TotalTokens: 625}},
		{"test_anthropic_model_instructions.bodies/00.response.json", "stop", "", 0, translate.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
			c.ResponseHeaders(200, "application/json")
			out, err := c.ResponseBody(translatetest.ReadFile(t, recorded+tt.file), true)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", out)
			var got struct {
				Choices []struct {
					FinishReason string `json:"finish_reason"`
					Message      struct {
						Content   *string
						ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
					}
				}
			}
			json.Unmarshal(out, &got)
			ch := got.Choices[0]
			if ch.FinishReason != tt.finish || len(ch.Message.ToolCalls) != tt.tools || ch.Message.Content == nil || !strings.HasPrefix(*ch.Message.Content, tt.text) {
				t.Errorf("choice = %+v", ch)
			}
			if tt.tools > 0 && ch.Message.ToolCalls[0].Function.Arguments != `{"name":"Alice"}` {
				t.Errorf("arguments = %q", ch.Message.ToolCalls[0].Function.Arguments)
			}
			if tt.usage.TotalTokens > 0 && c.Usage() != tt.usage {
				t.Errorf("usage = %+v, want %+v", c.Usage(), tt.usage)
			}
		})
	}
}

func runStream(t testing.TB, body string, chunks [][]byte) ([]byte, translate.Usage) {
	t.Helper()
	c := newChat(t, body)
	c.ResponseHeaders(200, "text/event-stream; charset=utf-8")
	var out []byte
	for _, ch := range chunks {
		b, _ := c.ResponseBody(ch, false)
		out = append(out, b...)
	}
	b, _ := c.ResponseBody(nil, true)
	return append(out, b...), c.Usage()
}

const streamReq = `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`

func TestRecordedStreams(t *testing.T) {
	for _, file := range []string{"test_anthropic_model_thinking_part_stream.bodies/00.response.sse", "test_anthropic_model_thinking_part_redacted_stream.bodies/00.response.sse"} {
		t.Run(file, func(t *testing.T) {
			out, usage := runStream(t, streamReq, [][]byte{translatetest.ReadFile(t, recorded+file)})
			spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) || !bytes.Contains(out, []byte(`"finish_reason":"stop"`)) || usage.CompletionTokens == 0 {
				t.Errorf("usage %+v; output tail %q", usage, out[max(0, len(out)-300):])
			}
		})
	}
	out, usage := runStream(t, streamReq, [][]byte{translatetest.ReadFile(t, recorded+"test_anthropic_model_thinking_part_stream.bodies/00.response.sse")})
	if want := (translate.Usage{PromptTokens: 43, CompletionTokens: 282, TotalTokens: 325}); usage != want {
		t.Errorf("usage = %+v, want %+v", usage, want)
	}
	if !bytes.Contains(out, []byte(`"reasoning_content":"This"`)) || !bytes.Contains(out, []byte(`"choices":[],"usage":{"prompt_tokens":43`)) {
		t.Error("want reasoning deltas and the usage chunk")
	}
}

func TestStreamToolCallDeltas(t *testing.T) {
	up := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ty\": \"Paris\"}"}}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_2","name":"get","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}

event: message_stop
data: {"type":"message_stop"}

`
	out, usage := runStream(t, streamReq, [][]byte{[]byte(up)})
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
	args := map[int]string{}
	for _, ev := range strings.Split(strings.TrimSpace(string(out)), "\n\n") {
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int
						Function struct{ Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch)
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				args[tc.Index] += tc.Function.Arguments
			}
		}
	}
	if args[0] != `{"city": "Paris"}` || args[1] != "{}" || !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) {
		t.Errorf("arguments %v; output %s", args, out)
	}
	if usage.PromptTokens != 10 || usage.CompletionTokens != 30 {
		t.Errorf("usage = %+v", usage)
	}
}

func TestStreamErrors(t *testing.T) {
	overloaded := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	for name, up := range map[string]string{"error event": overloaded, "cut off": "event: message_start\ndata: {\"type\":\"message_st"} {
		out, _ := runStream(t, streamReq, [][]byte{[]byte(up)})
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
		if !strings.HasPrefix(string(out), `data: {"error":{`) || strings.Contains(string(out), "[DONE]") {
			t.Errorf("%s: output %q, want one error event", name, out)
		}
	}
}

func TestProviderErrors(t *testing.T) {
	tests := []struct {
		status, wantStatus int
		body, wantType     string
	}{
		{400, 400, string(translatetest.ReadFile(t, recorded+"test_anthropic_explicit_effort_xhigh_unsupported_model_errors.bodies/00.response.json")), "invalid_request_error"},
		{429, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "rate_limit_error"},
		{529, 503, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "server_error"},
		{401, 502, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-123"}}`, "server_error"},
		{500, 500, `<html>oops</html>`, "server_error"},
	}
	for _, tt := range tests {
		c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
		head := c.ResponseHeaders(tt.status, "application/json")
		out, _ := c.ResponseBody([]byte(tt.body), true)
		spec.ValidateT(t, "ErrorResponse", out)
		var e struct {
			Error struct{ Type, Message string }
		}
		json.Unmarshal(out, &e)
		if head.Status != tt.wantStatus || e.Error.Type != tt.wantType || strings.Contains(e.Error.Message, "sk-ant") {
			t.Errorf("%d: status %d, error %+v", tt.status, head.Status, e.Error)
		}
	}
}

func TestStreamAnySplit(t *testing.T) {
	up := translatetest.ReadFile(t, recorded+"test_anthropic_model_thinking_part_stream.bodies/00.response.sse")
	whole, _ := runStream(t, streamReq, [][]byte{up})
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		if got, _ := runStream(t, streamReq, translatetest.RandomChunks(r, up, 50)); !bytes.Equal(whole, got) {
			t.Fatal("split output differs")
		}
	}
}

func FuzzStreamSplit(f *testing.F) {
	f.Add(translatetest.ReadFile(f, recorded+"test_anthropic_model_thinking_part_redacted_stream.bodies/00.response.sse")[:900], uint64(1))
	f.Add([]byte("event: error\r\ndata: {\"type\":\"error\"}\r\n\r\n"), uint64(2))
	f.Fuzz(func(t *testing.T, up []byte, seed uint64) {
		whole, _ := runStream(t, streamReq, [][]byte{up})
		got, _ := runStream(t, streamReq, translatetest.RandomChunks(rand.New(rand.NewPCG(seed, seed)), up, 50))
		if !bytes.Equal(whole, got) {
			t.Fatalf("split output differs\nwhole %q\nsplit %q", whole, got)
		}
	})
}

func BenchmarkStreamChunk(b *testing.B) {
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\" crossing\"}}\n\n")
	c := newChat(b, streamReq)
	c.ResponseHeaders(200, "text/event-stream")
	c.ResponseBody([]byte(`data: {"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":10}}}`+"\n\n"), false)
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := c.ResponseBody(ev, false); len(out) == 0 {
			b.Fatal("no output")
		}
	}
}

// A JSON response_format goes through a forced tool; the client sees JSON
// content and a normal stop, streamed or not.
func TestResponseFormatThroughForcedTool(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"city?"}],"response_format":{"type":"json_schema","json_schema":{"name":"c","schema":{"type":"object","properties":{"city":{"type":"string"}}}}}}`
	got := upstreamBody(t, body)
	if tc := got["tool_choice"].(map[string]any); tc["name"] != jsonTool || len(got["tools"].([]any)) != 1 {
		t.Errorf("upstream = %v", got)
	}
	c := newChat(t, body)
	c.RequestBody()
	c.ResponseHeaders(200, "application/json")
	out, err := c.ResponseBody([]byte(`{"id":"msg_1","model":"claude","content":[{"type":"tool_use","id":"t","name":"json_response","input":{"city": "Paris"}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	if !bytes.Contains(out, []byte(`"content":"{\"city\":\"Paris\"}"`)) || !bytes.Contains(out, []byte(`"finish_reason":"stop"`)) || bytes.Contains(out, []byte("tool_calls")) {
		t.Errorf("output %s", out)
	}
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":5}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"json_response","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`
	s := newChat(t, strings.Replace(body, `"messages"`, `"stream":true,"messages"`, 1))
	s.RequestBody()
	s.ResponseHeaders(200, "text/event-stream")
	sout, _ := s.ResponseBody([]byte(stream), false)
	end, _ := s.ResponseBody(nil, true)
	sout = append(sout, end...)
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", sout)
	if !bytes.Contains(sout, []byte(`"content":"{\"city\": "`)) || bytes.Contains(sout, []byte("tool_calls")) || !bytes.Contains(sout, []byte(`"finish_reason":"stop"`)) {
		t.Errorf("stream %s", sout)
	}

	// With the client's tools the answer is one tool more, which the
	// model must call when it calls no other: a call of a client's tool
	// is a tool call, a call of the answer's the JSON content.
	withTools := newChat(t, strings.Replace(body, `"messages"`, `"tools":[{"type":"function","function":{"name":"f"}}],"messages"`, 1))
	up, err := withTools.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Tools      []struct{ Name string }
		ToolChoice map[string]any `json:"tool_choice"`
	}
	json.Unmarshal(up.Body, &sent)
	if len(sent.Tools) != 2 || sent.Tools[0].Name != "f" || sent.Tools[1].Name != "json_response" || sent.ToolChoice["type"] != "any" {
		t.Errorf("sent %s", up.Body)
	}
	withTools.ResponseHeaders(200, "application/json")
	out, err = withTools.ResponseBody([]byte(`{"id":"msg_2","model":"claude","content":[{"type":"tool_use","id":"t2","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	if !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) || !bytes.Contains(out, []byte(`"name":"f"`)) {
		t.Errorf("a call of the client's tool: %s", out)
	}
	if _, err := newChat(t, strings.Replace(body, `"messages"`, `"reasoning_effort":"low","messages"`, 1)).RequestBody(); err == nil {
		t.Error("response_format with reasoning_effort was accepted")
	}
}
