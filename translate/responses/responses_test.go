package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name, body   string
		param, code  string
		wantContinue bool
	}{
		{"missing input", `{"model":"m"}`, "input", "missing_required_parameter", false},
		{"continuation without input", `{"model":"m","previous_response_id":"resp_1"}`, "", "", true},
		{"missing model", `{"input":"hi"}`, "model", "missing_required_parameter", false},
		{"bad input type", `{"model":"m","input":5}`, "input", "invalid_type", false},
		{"temperature 3", `{"model":"m","input":"hi","temperature":3}`, "temperature", "invalid_value", false},
		{"max_output_tokens too small", `{"model":"m","input":"hi","max_output_tokens":5}`, "max_output_tokens", "invalid_value", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			var re *api.RequestError
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("error = %v", err)
			case tt.code == "":
				if r.PreviousResponseID == "" != !tt.wantContinue {
					t.Errorf("request = %+v", r)
				}
			case !errors.As(err, &re) || re.Param != tt.param || re.Code != tt.code:
				t.Errorf("error = %v, want param %s code %s", err, tt.param, tt.code)
			}
		})
	}
}

func chatMessages(t *testing.T, req *api.ChatRequest) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	if err := json.Unmarshal(req.Members["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestToChat(t *testing.T) {
	r, err := ParseRequest(translatetest.ReadFile(t, "../../testdata/fixtures/openai/responses/test_openai_responses_model_simple_response_with_tool_call.bodies/00.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	r.Members["instructions"] = json.RawMessage(`"Be brief."`)
	history := []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_text","text":"Earlier"}]}`),
		json.RawMessage(`{"type":"function_call","call_id":"c1","name":"get_capital","arguments":"{\"country\":\"X\"}"}`),
		json.RawMessage(`{"type":"function_call","call_id":"c2","name":"get_capital","arguments":"{}"}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"c1","output":"Xcity"}`),
		json.RawMessage(`{"type":"reasoning","summary":[]}`),
		json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Xcity it is."}]}`),
	}
	req, err := ToChat(r, history)
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{}
	for _, m := range chatMessages(t, req) {
		roles = append(roles, m["role"].(string))
	}
	if diff := cmp.Diff([]string{"system", "user", "assistant", "tool", "assistant", "user"}, roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	var tools []map[string]any
	json.Unmarshal(req.Members["tools"], &tools)
	if len(tools) != 1 || tools[0]["function"].(map[string]any)["name"] != "get_capital" || string(req.Members["tool_choice"]) != `"auto"` {
		t.Errorf("tools = %v, tool_choice %s", tools, req.Members["tool_choice"])
	}
	msgs := chatMessages(t, req)
	if calls := msgs[2]["tool_calls"].([]any); len(calls) != 2 {
		t.Errorf("consecutive function calls were not merged: %v", msgs[2])
	}
}

// A recorded Anthropic answer goes through the Anthropic chat translator and
// the bridge and comes out a valid Response with typed output items.
func TestFromChatThroughAProvider(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"claude","input":"Who is the youngest?","metadata":{"k":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	chatReq, err := ToChat(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := anthropic.NewChat(translate.Target{Model: "claude-haiku-4-5"}, chatReq)
	if _, err := tr.RequestBody(); err != nil {
		t.Fatal(err)
	}
	tr.ResponseHeaders(200, "application/json")
	chatOut, err := tr.ResponseBody(translatetest.ReadFile(t, "../../testdata/fixtures/anthropic/test_multiple_parallel_tool_calls.bodies/00.response.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	out, err := FromChat(r, chatOut, "resp_abc", time.Unix(1700000000, 0).Unix())
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	var resp struct {
		Status string
		Output []struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		Usage struct{ InputTokens, OutputTokens int64 } `json:"usage"`
	}
	json.Unmarshal(out, &resp)
	types := []string{}
	for _, o := range resp.Output {
		types = append(types, o.Type)
	}
	if resp.Status != "completed" || strings.Join(types, ",") != "message,function_call,function_call,function_call,function_call" {
		t.Errorf("status %s, output %v", resp.Status, types)
	}
	if !strings.Contains(string(out), `"input_tokens":423`) || !strings.Contains(string(out), `"metadata":{"k":"v"}`) {
		t.Errorf("usage or metadata missing: %s", out)
	}
}

func TestFromChatIncomplete(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"hi"}`))
	chatOut := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"length","logprobs":null,
		"message":{"role":"assistant","content":"Hel","refusal":null,"reasoning_content":"thinking"}}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	out, err := FromChat(r, chatOut, "resp_x", 1)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	if !strings.Contains(string(out), `"status":"incomplete"`) || !strings.Contains(string(out), `"reason":"max_output_tokens"`) || !strings.Contains(string(out), `"type":"reasoning"`) {
		t.Errorf("output %s", out)
	}
}

// Cached and reasoning tokens of the chat usage reach the Responses usage,
// in a Response and at the end of a stream.
func TestUsageDetails(t *testing.T) {
	const usage = `{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,` +
		`"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":7,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`
	const want = `"usage":{"input_tokens":10,"input_tokens_details":{"cache_write_tokens":0,"cached_tokens":4},` +
		`"output_tokens":20,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":30}`

	r, _ := ParseRequest([]byte(`{"model":"m","input":"hi"}`))
	out, err := FromChat(r, []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","logprobs":null,
		"message":{"role":"assistant","content":"Hi","refusal":null}}],"usage":`+usage+`}`), "resp_u", 1)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	if !strings.Contains(string(out), want) {
		t.Errorf("Response %s\nwant %s", out, want)
	}

	r, _ = ParseRequest([]byte(`{"model":"m","input":"hi","stream":true}`))
	s := NewStream(r, "resp_u", 1)
	stream := s.Feed([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`+"\n\n"+
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":`+usage+"}\n\ndata: [DONE]\n\n"), true)
	events := checkEvents(t, stream)
	if last, _ := json.Marshal(events[len(events)-1]); !strings.Contains(string(last), want) {
		t.Errorf("last event %s\nwant %s", last, want)
	}
}

// The error event of a failed chat stream keeps the chat error's code or,
// when it has none, says its type: the Responses event has no type. The
// response.failed after it, for clients that ignore error events, has a
// code the Response schema has.
func TestStreamErrorCode(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"hi","stream":true}`))
	for chatErr, want := range map[string]struct{ event, failed string }{
		`{"message":"Slow down.","type":"rate_limit_error","param":null,"code":null}`:              {`"code":"rate_limit_error"`, "rate_limit_exceeded"},
		`{"message":"Too long.","type":"invalid_request_error","param":"input","code":"too_long"}`: {`"code":"too_long","message":"Too long.","param":"input"`, "server_error"},
		`{"message":"Odd."}`: {`"code":null`, "server_error"},
	} {
		out := NewStream(r, "resp_e", 1).Feed([]byte("data: {\"error\":"+chatErr+"}\n\n"), true)
		events := checkEvents(t, out)
		if len(events) != 2 || events[0]["type"] != "error" || !strings.Contains(string(out), want.event) {
			t.Fatalf("chat error %s: got %s, want %s", chatErr, out, want.event)
		}
		resp := events[1]["response"].(map[string]any)
		if e := resp["error"].(map[string]any); events[1]["type"] != "response.failed" || resp["status"] != "failed" || e["code"] != want.failed {
			t.Errorf("chat error %s: %v, want response.failed with code %s", chatErr, events[1], want.failed)
		}
	}
}

// A client error about the chat request the bridge built names the member
// of the Responses request it came from.
func TestResponsesError(t *testing.T) {
	for chat, want := range map[string]string{
		"reasoning_effort":            "reasoning.effort",
		"max_completion_tokens":       "max_output_tokens",
		"response_format.json_schema": "text.format",
		"messages[3].content[0].type": "input",
		"tools[1].function.name":      "tools[1].name",
		"tools[1].function":           "tools[1]",
		"tools[1].type":               "tools[1].type",
		"tool_choice":                 "tool_choice",
		"temperature":                 "temperature",
	} {
		err := responsesError(fmt.Errorf("wrapped: %w", api.Invalid(chat, "Invalid '%s': no.", chat)))
		var re *api.RequestError
		if !errors.As(err, &re) || re.Param != want || re.Message != "Invalid '"+want+"': no." {
			t.Errorf("%s: got %v (param %v), want %s", chat, err, re, want)
		}
	}
	if err := errors.New("other"); responsesError(err) != err {
		t.Error("an error that is no client error changed")
	}

	// The bridge's own checks name the input item of the request, after
	// any stored history.
	history := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"Hi"}`)}
	r, _ := ParseRequest([]byte(`{"model":"m","previous_response_id":"resp_1","input":[{"role":"user","content":"x"},{"type":"no_such_item"}]}`))
	if _, err := ToChat(r, history); !errors.As(err, new(*api.RequestError)) || !strings.Contains(err.Error(), "no_such_item") {
		t.Fatalf("ToChat: %v", err)
	} else if re := err.(*api.RequestError); re.Param != "input[1].type" {
		t.Errorf("param = %s, want input[1].type", re.Param)
	}
	r, _ = ParseRequest([]byte(`{"model":"m","input":"x","max_output_tokens":20.5}`))
	if _, err := ToChat(r, nil); !errors.As(err, new(*api.RequestError)) || err.(*api.RequestError).Param != "max_output_tokens" {
		t.Errorf("a fractional max_output_tokens: %v", err)
	}
}

// Tools an additional_tools item makes available (Codex's code mode
// sends its tools so) join the chat request's tools, from the stored
// conversation and the input alike, and the item itself is no message; a
// call of such a custom tool comes back as the custom tool call it is.
func TestToChatAdditionalTools(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"m","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"input":[
		{"type":"additional_tools","role":"developer","tools":[{"type":"custom","name":"exec","description":"Run JavaScript"}]},
		{"type":"message","role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	history := []json.RawMessage{json.RawMessage(`{"type":"additional_tools","id":"at_1","role":"developer","tools":[{"type":"function","name":"g"},{"type":"function","name":"f"}]}`)}
	req, err := ToChat(r, history)
	if err != nil {
		t.Fatal(err)
	}
	var tools []struct{ Function struct{ Name string } }
	json.Unmarshal(req.Members["tools"], &tools) //nolint:errcheck // checked below
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Function.Name)
	}
	if diff := cmp.Diff([]string{"f", "g", "exec"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if msgs := chatMessages(t, req); len(msgs) != 1 || msgs[0]["role"] != "user" {
		t.Errorf("messages %v, want the user's alone", msgs)
	}
	if got := r.tools.call("exec"); got.kind != customTool || got.name != "exec" {
		t.Errorf("a call of exec maps back to %+v, want the custom tool", got)
	}
	bad, _ := ParseRequest([]byte(`{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"function"}]}]}`))
	if _, err := ToChat(bad, nil); err == nil || !strings.Contains(err.Error(), "input[0].tools[0].name") {
		t.Errorf("a nameless additional tool: %v", err)
	}
}
