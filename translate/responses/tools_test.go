package responses

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

// codexRequest offers what Codex's default request offers: a function, a
// freeform tool with a grammar, a namespace of MCP tools and tools OpenAI
// runs itself, with a history of a custom tool call, a namespaced call
// whose output is an array of parts, and a hosted tool's call.
const codexRequest = `{"model":"m","stream":STREAM,"input":[
 {"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the crash in issue 1."}]},
 {"type":"custom_tool_call","call_id":"call_1","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"},
 {"type":"custom_tool_call_output","call_id":"call_1","output":"Done!"},
 {"type":"function_call","call_id":"call_2","namespace":"mcp__github__","name":"get_issue","arguments":"{\"n\":1}"},
 {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"Issue 1:"},{"type":"input_image","image_url":"https://example.com/a.png"},{"type":"input_text","text":"crash on start"}]},
 {"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"crash"}}],
"tools":[
 {"type":"function","name":"exec_command","description":"Runs a command.","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]},"strict":false},
 {"type":"custom","name":"apply_patch","description":"Edits files.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},
 {"type":"namespace","name":"mcp__github__","description":"GitHub.","tools":[{"type":"function","name":"get_issue","parameters":{"type":"object","properties":{"n":{"type":"integer"}}}}]},
 {"type":"web_search"},{"type":"tool_search"}],
"tool_choice":"auto"}`

func codex(t *testing.T, stream bool) *Request {
	t.Helper()
	r, err := ParseRequest([]byte(strings.Replace(codexRequest, "STREAM", map[bool]string{true: "true", false: "false"}[stream], 1)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every tool type a client offers reaches the chat model as a function,
// or is left out and named in the warning; calls and outputs of each
// type in the history become the chat turns they were.
func TestBridgeOffersEveryToolType(t *testing.T) {
	r := codex(t, false)
	req, err := ToChat(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tools []struct {
		Function struct {
			Name       string
			Parameters struct {
				Properties map[string]struct{ Type, Description string }
				Required   []string
			}
		}
	}
	if err := json.Unmarshal(req.Members["tools"], &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Function.Name)
	}
	if want := []string{"exec_command", "apply_patch", "mcp__github__get_issue"}; !slices.Equal(names, want) {
		t.Errorf("chat tools %v, want %v", names, want)
	}
	patch := tools[1].Function.Parameters
	if in := patch.Properties["input"]; in.Type != "string" || !strings.Contains(in.Description, "lark grammar:\nstart: begin_patch") ||
		!slices.Equal(patch.Required, []string{"input"}) {
		t.Errorf("apply_patch parameters %+v", patch)
	}
	if w := r.tools.warning(false); !strings.HasSuffix(w, ": web_search, tool_search") {
		t.Errorf("warning %q", w)
	}

	var got []string
	for _, m := range chatMessages(t, req) {
		line := m["role"].(string)
		if c, ok := m["content"].(string); ok {
			line += " " + c
		}
		calls, _ := m["tool_calls"].([]any)
		for _, tc := range calls {
			fn := tc.(map[string]any)["function"].(map[string]any)
			line += " " + fn["name"].(string) + fn["arguments"].(string)
		}
		got = append(got, line)
	}
	want := []string{
		"user",
		`assistant apply_patch{"input":"*** Begin Patch\n*** End Patch\n"}`,
		"tool Done!",
		`assistant mcp__github__get_issue{"n":1}`,
		"tool Issue 1:\ncrash on start",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chat messages (-want +got):\n%s", diff)
	}
}

// anthropicCalls is Anthropic's answer calling the freeform tool and the
// namespaced one, as its Messages API documents tool_use.
const anthropicCalls = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"text","text":"Patching."},` +
	`{"type":"tool_use","id":"toolu_1","name":"apply_patch","input":{"input":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}},` +
	`{"type":"tool_use","id":"toolu_2","name":"mcp__github__get_issue","input":{"n":2}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":40}}`

// anthropicCallsStream is the same answer streamed, the tool inputs in
// pieces cut inside their strings.
var anthropicCallsStream = strings.Join([]string{
	`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":1}}}`,
	`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"apply_patch","input":{}}}`,
	`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"input\":\"*** Begin Pa"}}`,
	`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"tch\\n*** End Patch\\n\"}"}}`,
	`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
	`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_2","name":"mcp__github__get_issue","input":{}}}`,
	`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"n\": 2}"}}`,
	`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":1}`,
	`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`,
	`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
}, "\n\n") + "\n\n"

// callItems are the output's tool call items, reduced to what the client
// acts on.
func callItems(t *testing.T, output []json.RawMessage) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range output {
		var it map[string]any
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatal(err)
		}
		if it["type"] == "message" {
			continue
		}
		delete(it, "id")
		out = append(out, it)
	}
	return out
}

var wantCalls = []map[string]any{
	{"type": "custom_tool_call", "call_id": "toolu_1", "name": "apply_patch", "status": "completed",
		"input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"},
	{"type": "function_call", "call_id": "toolu_2", "namespace": "mcp__github__", "name": "get_issue", "status": "completed",
		"arguments": `{"n":2}`},
}

// codexOnClaude is the bridge's translator of codexRequest on Claude, its
// request sent.
func codexOnClaude(t *testing.T, stream bool) *Translator {
	t.Helper()
	r := codex(t, stream)
	req, err := ToChat(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTranslator(anthropic.NewChat(translate.Target{Model: "claude-sonnet-4-5"}, req), r, nil, "resp_1", 1700000000)
	if _, err := tr.RequestBody(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// The model's calls come back as the client's tool types: a freeform
// tool's as a custom_tool_call with its input, a namespaced function's
// with its namespace and own name; the response warns of the tools left
// out.
func TestBridgeCallsComeBackAsTheirToolType(t *testing.T) {
	tr := codexOnClaude(t, false)
	if h := tr.ResponseHeaders(200, "application/json"); !strings.Contains(h.Warning, "web_search, tool_search") {
		t.Errorf("head %+v: no warning of the tools left out", h)
	}
	out, err := tr.ResponseBody([]byte(anthropicCalls), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	if diff := cmp.Diff(wantCalls, callItems(t, tr.Conversation()[len(tr.Conversation())-3:])); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(out), `"id":"ctc_1_0"`) {
		t.Errorf("custom tool call id: %s", out)
	}
}

// Streamed, the same calls come as their types' events: a custom tool's
// input whole at its end (the model's pieces cut inside its JSON string),
// a function's arguments as they arrive.
func TestBridgeStreamsCallsAsTheirToolType(t *testing.T) {
	tr := codexOnClaude(t, true)
	if h := tr.ResponseHeaders(200, "text/event-stream"); !h.Stream || h.Warning == "" {
		t.Fatalf("head %+v", h)
	}
	var stream []byte
	for _, c := range strings.SplitAfter(anthropicCallsStream, "\n\n") {
		b, err := tr.ResponseBody([]byte(c), false)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b...)
	}
	end, err := tr.ResponseBody(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	events := checkEvents(t, append(stream, end...))
	// Items close when the response does (stream.go), the custom tool
	// call's added and the function call's collapsed into one here.
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta " +
		"response.custom_tool_call_input.delta response.custom_tool_call_input.done response.output_item.done " +
		"response.function_call_arguments.done response.output_item.done response.completed"
	if got := types(events); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	calls := slices.Clone(wantCalls)
	calls[0] = maps.Clone(calls[0])
	calls[0]["input"] = "*** Begin Patch\n*** End Patch\n"
	calls[1] = maps.Clone(calls[1])
	calls[1]["arguments"] = `{"n": 2}`
	if diff := cmp.Diff(calls, callItems(t, tr.Conversation()[len(tr.Conversation())-2:])); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// A tool the request does not describe (no name, no type) is refused
// where it is; a namespace inside a namespace too.
func TestBridgeToolErrors(t *testing.T) {
	for body, param := range map[string]string{
		`{"model":"m","input":"hi","tools":[{"type":"custom"}]}`:                                                         "tools[0].name",
		`{"model":"m","input":"hi","tools":[{"name":"f"}]}`:                                                              "tools[0].type",
		`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"a","tools":[{"type":"namespace","name":"b"}]}]}`: "tools[0].tools[0]",
		`{"model":"m","input":"hi","tools":{"type":"function"}}`:                                                         "tools",
	} {
		_, err := ParseRequest([]byte(body))
		var re *api.RequestError
		if !errors.As(err, &re) || re.Param != param {
			t.Errorf("%s: error %v, want one naming %s", body, err, param)
		}
	}
}

// An item_reference stands for the item of the conversation with its id:
// one of the stored history, which the conversation holds already, or of
// the request's own input; an unknown id is refused.
func TestBridgeItemReferences(t *testing.T) {
	history := []json.RawMessage{
		json.RawMessage(`{"type":"message","id":"msg_1","role":"user","content":[{"type":"input_text","text":"What is 2+2?"}]}`),
		json.RawMessage(`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"calc","arguments":"{\"e\":\"2+2\"}"}`),
	}
	r, err := ParseRequest([]byte(`{"model":"m","previous_response_id":"resp_1","input":[` +
		`{"type":"item_reference","id":"fc_1"},{"type":"function_call_output","call_id":"call_1","output":"4"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ToChat(r, history[:1]); err == nil || !strings.Contains(err.Error(), "fc_1") {
		t.Fatalf("a reference to an item the conversation lacks: %v", err)
	}
	req, err := ToChat(r, history)
	if err != nil {
		t.Fatal(err)
	}
	msgs := chatMessages(t, req)
	if calls, _ := msgs[1]["tool_calls"].([]any); len(msgs) != 3 || len(calls) != 1 || msgs[2]["content"] != "4" {
		t.Errorf("messages %v: want the question, the referenced call once and its output", msgs)
	}
}

// A web_search tool reaches a model whose operator allows web search as
// web_search_options (with its location), and the citations come back as
// the output text's url_citation annotations; otherwise, and always for
// Codex's cached-only search (external_web_access false), it is left out
// and named in the warning.
func TestWebSearchTool(t *testing.T) {
	build := func(tools string, search bool) (*Translator, map[string]any) {
		r, err := ParseRequest([]byte(`{"model":"m","input":"Shannon?","tools":[` + tools + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		req, err := ToChat(r, nil, WebSearch(search))
		if err != nil {
			t.Fatal(err)
		}
		tr := NewTranslator(anthropic.NewChat(translate.Target{Model: "claude-sonnet-4-5", WebSearch: search}, req), r, nil, "resp_1", 1700000000, WebSearch(search))
		up, err := tr.RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(up.Body, &m)
		return tr, m
	}
	tr, m := build(`{"type":"web_search","user_location":{"type":"approximate","city":"Oslo"}}`, true)
	if got, _ := json.Marshal(m["tools"]); string(got) != `[{"name":"web_search","type":"web_search_20250305","user_location":{"city":"Oslo","type":"approximate"}}]` {
		t.Errorf("tools %s", got)
	}
	if h := tr.ResponseHeaders(200, "application/json"); h.Warning != "" {
		t.Errorf("warning %q", h.Warning)
	}
	out, err := tr.ResponseBody([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[`+
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"shannon"}},`+
		`{"type":"text","text":"Born in 1916.","citations":[{"type":"web_search_result_location","url":"https://example.com/s","title":"S","cited_text":"1916"}]}],`+
		`"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":5}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	if !strings.Contains(string(out), `"annotations":[{"end_index":13,"start_index":0,"title":"S","type":"url_citation","url":"https://example.com/s"}]`) || strings.Contains(string(out), "function_call") {
		t.Errorf("response %s", out)
	}

	for _, tt := range []struct {
		tools  string
		search bool
	}{{`{"type":"web_search"}`, false}, {`{"type":"web_search","external_web_access":false}`, true}} {
		tr, m := build(tt.tools, tt.search)
		if m["tools"] != nil {
			t.Errorf("%s: tools %v", tt.tools, m["tools"])
		}
		if h := tr.ResponseHeaders(200, "application/json"); !strings.Contains(h.Warning, "left out: web_search") {
			t.Errorf("%s: warning %q", tt.tools, h.Warning)
		}
	}
}
