package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

// passthroughCases relay recorded OpenAI Responses traffic; the golden
// file testdata/<case>.json or .sse is what the client gets. The
// recordings span API versions: the older ones lack sequence_number,
// logprobs and the function name on function_call_arguments.done, all of
// them send "user": null.
var passthroughCases = []struct {
	name, recording string
	stream          bool
	wantUsage       translate.Usage
}{
	{"passthrough-text", "test_openai_responses_model_simple_response.bodies/00.response.json", false,
		translate.Usage{PromptTokens: 14, CompletionTokens: 8, TotalTokens: 22}},
	{"passthrough-tool-call", "test_openai_responses_model_simple_response_with_tool_call.bodies/00.response.json", false,
		translate.Usage{PromptTokens: 40, CompletionTokens: 18, TotalTokens: 58}},
	{"passthrough-stream-logprobs", "test_openai_instructions_with_responses_logprobs_streaming.bodies/00.response.sse", true,
		translate.Usage{PromptTokens: 25, CompletionTokens: 10, TotalTokens: 35}},
	{"passthrough-stream-tools", "test_openai_responses_stream.bodies/00.response.sse", true,
		translate.Usage{PromptTokens: 255, CompletionTokens: 16, TotalTokens: 271}},
	{"passthrough-stream-reasoning", "test_openai_responses_streaming_usage.bodies/00.response.sse", true,
		translate.Usage{PromptTokens: 53, CompletionTokens: 469, TotalTokens: 522, ReasoningTokens: 448}},
}

func TestPassthroughGoldens(t *testing.T) {
	for _, tc := range passthroughCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"gpt","input":"Hello!","stream":` + map[bool]string{true: "true", false: "false"}[tc.stream] + `}`))
			if err != nil {
				t.Fatal(err)
			}
			up := translatetest.ReadFile(t, "../../testdata/fixtures/openai/responses/"+tc.recording)
			var got []byte
			p := NewPassthrough(translate.Target{Model: "gpt-4o"}, r, nil, "resp_golden")
			if tc.stream {
				p.ResponseHeaders(200, "text/event-stream; charset=utf-8")
				got = translatetest.Stream(t, p, [][]byte{up})
				checkEvents(t, got)
				// Any split of the upstream bytes gives the same stream.
				again := NewPassthrough(translate.Target{Model: "gpt-4o"}, r, nil, "resp_golden")
				again.ResponseHeaders(200, "text/event-stream")
				if split := translatetest.Stream(t, again, translatetest.RandomChunks(randSource(), up, 37)); string(split) != string(got) {
					t.Error("a randomly split stream relays differently")
				}
			} else {
				p.ResponseHeaders(200, "application/json")
				if got, err = p.ResponseBody(up, true); err != nil {
					t.Fatal(err)
				}
				spec.ValidateT(t, "Response", got)
			}
			if p.Usage() != tc.wantUsage {
				t.Errorf("usage = %+v, want %+v", p.Usage(), tc.wantUsage)
			}
			conv := p.Conversation()
			if len(conv) < 2 || !strings.Contains(string(conv[0]), "Hello!") {
				t.Errorf("conversation = %s, want the input and the output", conv)
			}
			if !strings.Contains(string(got), `"id":"resp_golden"`) {
				t.Error("the client does not see the gateway's response id")
			}
			translatetest.Golden(t, goldenPath(tc.name, tc.stream), got)
		})
	}
}

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
// stores nothing; an upstream error response passes as an OpenAI error.
func TestPassthroughFailures(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"gpt","input":"Hi","stream":true}`))
	up := translatetest.ReadFile(t, "../../testdata/fixtures/openai/responses/test_openai_responses_stream.bodies/01.response.sse")
	cut := up[:strings.Index(string(up), "event: response.output_text.done")]
	p := NewPassthrough(translate.Target{Model: "gpt-4o"}, r, nil, "resp_cut")
	p.ResponseHeaders(200, "text/event-stream")
	got := translatetest.Stream(t, p, [][]byte{cut})
	events := checkEvents(t, got)
	last := events[len(events)-1]
	if last["type"] != "error" || last["code"] != "server_error" || p.Conversation() != nil {
		t.Errorf("last event %v; conversation %v", last, p.Conversation())
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
