package bedrock

import (
	"strings"
	"testing"

	"modelgate/translate/api/spec"
)

// A tool Bedrock ran itself (Nova's code interpreter, in the shape Nova's
// built-in tools documentation shows; no recording exists) is no tool call
// for the client, in JSON or in a stream: the client must not run it.
func TestServerToolUseIsNoToolCall(t *testing.T) {
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"Average of 10 and 24?"}]}`)
	c.RequestBody() //nolint:errcheck // a valid request
	c.ResponseHeaders(200, "application/json")
	out, err := c.ResponseBody([]byte(`{"output":{"message":{"role":"assistant","content":[`+
		`{"toolUse":{"input":{"code":"(10+24)/2"},"name":"nova_code_interpreter","toolUseId":"tooluse_W","type":"server_tool_use"}},`+
		`{"toolResult":{"content":[{"text":"{\"stdOut\":\"17.0\",\"stdErr\":\"\",\"exitCode\":0,\"isError\":false}"}],"status":"success","toolUseId":"tooluse_W","type":"nova_code_interpreter_result"}},`+
		`{"text":"The average is 17."}]}},"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":20,"totalTokens":30}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	if strings.Contains(string(out), "tool_calls") || !strings.Contains(string(out), `"content":"The average is 17."`) || !strings.Contains(string(out), `"finish_reason":"stop"`) {
		t.Errorf("answer %s", out)
	}

	s := newChat(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"Average?"}]}`)
	s.RequestBody() //nolint:errcheck // a valid request
	s.ResponseHeaders(200, "application/vnd.amazon.eventstream")
	var body []byte
	for _, f := range [][2]string{{"messageStart", `{"role":"assistant"}`},
		{"contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tooluse_W","name":"nova_code_interpreter","type":"server_tool_use"}}}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"code\":\"(10+24)/2\"}"}}}`},
		{"contentBlockStop", `{"contentBlockIndex":0}`},
		{"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"text":"The average is 17."}}`},
		{"contentBlockStop", `{"contentBlockIndex":1}`}, {"messageStop", `{"stopReason":"end_turn"}`},
		{"metadata", `{"usage":{"inputTokens":10,"outputTokens":20,"totalTokens":30},"metrics":{"latencyMs":1}}`}} {
		body = append(body, eventFrame(f[0], f[1])...)
	}
	out, err = s.ResponseBody(body, true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "tool_calls") || !strings.Contains(string(out), "The average is 17.") || !strings.Contains(string(out), `"finish_reason":"stop"`) {
		t.Errorf("stream:\n%s", out)
	}
}
