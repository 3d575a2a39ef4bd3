package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

// A continuation goes upstream as the stored items and the new input:
// never as previous_response_id, and without the item ids of whichever
// provider made them.
func TestPassthroughRequestInlinesTheConversation(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"gpt","input":"And then?","previous_response_id":"resp_prev","instructions":"Be brief.","store":false}`))
	if err != nil {
		t.Fatal(err)
	}
	history := []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"user","content":"Hi"}`),
		json.RawMessage(`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"thinking"}]}`),
		json.RawMessage(`{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAAA"}`),
		json.RawMessage(`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello","annotations":[]}]}`),
	}
	p := NewPassthrough(translate.Target{Model: "gpt-4o", BasePath: "/base", APIKey: "sk-provider"}, r, history, "resp_next")
	up, err := p.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	if up.Path != "/base/v1/responses" {
		t.Errorf("path = %s", up.Path)
	}
	var body struct {
		Model        string           `json:"model"`
		Previous     *string          `json:"previous_response_id"`
		Instructions string           `json:"instructions"`
		Store        *bool            `json:"store"`
		Input        []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(up.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "gpt-4o" || body.Previous != nil || body.Instructions != "Be brief." || body.Store == nil || *body.Store {
		t.Errorf("upstream body = %s", up.Body)
	}
	for _, it := range body.Input {
		if _, ok := it["id"]; ok && it["type"] != "reasoning" {
			t.Errorf("item %v keeps its id", it)
		}
	}
	if len(body.Input) != 4 || body.Input[1]["id"] != "rs_2" || body.Input[3]["content"] != "And then?" {
		t.Errorf("input = %v, want user, encrypted reasoning, assistant, new input", body.Input)
	}
	auth := ""
	for _, h := range up.Headers {
		if h.Name == "authorization" {
			auth = h.Value
		}
	}
	if auth != "Bearer sk-provider" {
		t.Errorf("authorization = %q", auth)
	}
}

// A stream cut off before its terminal event ends with an error event and
// response.failed and stores nothing; an upstream error response passes as
// an OpenAI error.
func TestPassthroughFailures(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"gpt","input":"Hi","stream":true}`))
	up := translatetest.ReadFile(t, "../../testdata/fixtures/openai/responses/test_openai_responses_stream.bodies/01.response.sse")
	cut := up[:strings.Index(string(up), "event: response.output_text.done")]
	p := NewPassthrough(translate.Target{Model: "gpt-4o"}, r, nil, "resp_cut")
	p.ResponseHeaders(200, "text/event-stream")
	got := translatetest.Stream(t, p, [][]byte{cut})
	events := checkEvents(t, got)
	errEvent, last := events[len(events)-2], events[len(events)-1]
	if errEvent["type"] != "error" || errEvent["code"] != "server_error" || p.Conversation() != nil {
		t.Errorf("error event %v; conversation %v", errEvent, p.Conversation())
	}
	// Then the Response as the stream last showed it, failed.
	if resp, _ := last["response"].(map[string]any); last["type"] != "response.failed" || resp["status"] != "failed" ||
		resp["id"] != "resp_cut" || resp["error"].(map[string]any)["code"] != "server_error" {
		t.Errorf("last event %v", last)
	}

	p = NewPassthrough(translate.Target{Model: "gpt-4o"}, r, nil, "resp_err")
	if head := p.ResponseHeaders(401, "application/json"); head.Status != 502 || head.Stream {
		t.Errorf("head = %+v: a provider refusing the gateway's key is a bad gateway", head)
	}
	out, err := p.ResponseBody([]byte(`{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "ErrorResponse", out)

	p = NewPassthrough(translate.Target{Model: "gpt-4o"}, r, nil, "resp_bad")
	p.ResponseHeaders(200, "text/event-stream")
	got = translatetest.Stream(t, p, [][]byte{[]byte("data: [DONE]\n\nevent: response.created\ndata: {}\n\n")})
	if events := checkEvents(t, got); len(events) != 1 || events[0]["type"] != "error" {
		t.Errorf("a non-Responses event: %s", got)
	}
}

func BenchmarkPassthroughTextDelta(b *testing.B) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	p := NewPassthrough(translate.Target{Model: "m"}, r, nil, "resp_b")
	p.ResponseHeaders(200, "text/event-stream")
	chunk := []byte("event: response.output_text.delta\ndata: " +
		`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67e554a2","output_index":0,"content_index":0,"delta":" capital","logprobs":[]}` + "\n\n")
	b.ReportAllocs()
	for b.Loop() {
		p.seq = 4 // as if every event were the fifth
		if out, _ := p.ResponseBody(chunk, false); len(out) == 0 {
			b.Fatal("no output")
		}
	}
}

func BenchmarkPassthroughArgumentsDelta(b *testing.B) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	p := NewPassthrough(translate.Target{Model: "m"}, r, nil, "resp_b")
	p.ResponseHeaders(200, "text/event-stream")
	chunk := []byte("event: response.function_call_arguments.delta\ndata: " +
		`{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_67e554a2","output_index":1,"delta":"{\"city\": \"Par"}` + "\n\n")
	b.ReportAllocs()
	for b.Loop() {
		p.seq = 4
		if out, _ := p.ResponseBody(chunk, false); len(out) == 0 {
			b.Fatal("no output")
		}
	}
}

// opaqueItems are the items Codex sends back to OpenAI as it got them:
// reasoning with encrypted_content, a compaction, a custom tool's call
// and output, a tool search's call and output.
var opaqueItems = []string{
	`{"type":"reasoning","id":"rs_9","summary":[],"encrypted_content":"gAAAAABo-opaque+/=","status":null}`,
	`{"type":"compaction","id":"cmp_9","encrypted_content":"enc-<not&base64>"}`,
	`{"type":"custom_tool_call","call_id":"call_9","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"}`,
	`{"type":"custom_tool_call_output","call_id":"call_9","output":"Done <ok> & well"}`,
	`{"type":"tool_search_call","id":"ts_9","call_id":"call_8","execution":"client","arguments":{"query":"git"},"status":"completed"}`,
	`{"type":"tool_search_output","id":"tso_9","call_id":"call_8","execution":"client","tools":[],"status":"completed"}`,
}

// On OpenAI, the items a client sends reach it byte for byte: the gateway
// neither reads nor rewrites what only OpenAI can (OpenAI's own
// encrypted content is bound to the key that made it).
func TestPassthroughOpaqueItemsByteForByte(t *testing.T) {
	input := "[" + strings.Join(opaqueItems, ",") + `,{"role":"user","content":"Go on."}]`
	r, err := ParseRequest([]byte(`{"model":"gpt","store":false,"include":["reasoning.encrypted_content"],"input":` + input + `}`))
	if err != nil {
		t.Fatal(err)
	}
	up, err := NewPassthrough(translate.Target{Model: "gpt-5-codex"}, r, nil, "resp_o").RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range opaqueItems {
		if !strings.Contains(string(up.Body), it) {
			t.Errorf("item changed on its way upstream: %s\nbody: %s", it, up.Body)
		}
	}
	if !strings.Contains(string(up.Body), `"include":["reasoning.encrypted_content"]`) || !strings.Contains(string(up.Body), `"store":false`) {
		t.Errorf("include or store changed: %s", up.Body)
	}
}

// A stream's searches are those of its completed Response: the
// web_search_call items whose action searched, not the items of the
// events before it.
func TestPassthroughStreamWebSearches(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"gpt","input":"News?","stream":true,"tools":[{"type":"web_search"}]}`))
	p := NewPassthrough(translate.Target{Model: "gpt-5"}, r, nil, "resp_ws")
	p.ResponseHeaders(200, "text/event-stream")
	search := func(id, action string) string {
		return `{"type":"web_search_call","id":"` + id + `","status":"completed","action":` + action + `}`
	}
	response := func(status, output string) string {
		return `{"id":"resp_up","object":"response","created_at":1,"status":"` + status + `","model":"gpt-5","output":[` + output + `],` +
			`"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`
	}
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":" + response("in_progress", "") + "}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":1,\"output_index\":0,\"item\":" +
		search("ws_1", `{"type":"search","query":"news"}`) + "}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":" +
		response("completed", search("ws_1", `{"type":"search","query":"news"}`)+","+search("ws_2", `{"type":"open_page","url":"https://example.com/"}`)+","+
			search("ws_3", `{"type":"search","queries":["more news"]}`)) + "}\n\n"
	translatetest.Stream(t, p, [][]byte{[]byte(stream)})
	if got := p.Usage(); got.WebSearchRequests != 2 || got.PromptTokens != 10 {
		t.Errorf("usage %+v, want 2 web searches", got)
	}
}
