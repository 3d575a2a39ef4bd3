package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

// compactRequest is a coding agent's conversation to compact, as Codex
// sends it: user turns, the model's answer and a tool round trip.
const compactRequest = `{"model":"m","instructions":"You are a coding agent.","input":[
 {"type":"message","role":"user","content":[{"type":"input_text","text":"Create a landing page for a dog café."}]},
 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Writing index.html."}]},
 {"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"},
 {"type":"function_call_output","call_id":"call_1","output":"index.html"},
 {"role":"user","content":"Now add a menu."}]}`

// anthropicSummary is Anthropic's answer with the summary.
const anthropicSummary = `{"id":"msg_s","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"text","text":"The user wants a landing page for a dog café; index.html exists. Next: a menu."}],` +
	`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":310,"output_tokens":25}}`

// A provider without the endpoint compacts through its chat translator:
// asked for a summary after the conversation, it answers a
// CompactResource of the user messages and one compaction item, which a
// later request replays as the summary, on any provider.
func TestCompactBridge(t *testing.T) {
	r, err := ParseRequest([]byte(compactRequest))
	if err != nil {
		t.Fatal(err)
	}
	var sent *api.ChatRequest
	tr, err := NewCompactBridge(func(req *api.ChatRequest) translate.Translator {
		sent = req
		return anthropic.NewChat(translate.Target{Model: "claude-sonnet-4-5"}, req)
	}, r, nil, "resp_c1", 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	msgs := chatMessages(t, sent)
	if last := msgs[len(msgs)-1]; last["role"] != "user" || last["content"] != compactionPrompt || len(msgs) != 7 {
		t.Errorf("chat request %v: want the system message, the 5 turns and the summary request", msgs)
	}
	up, err := tr.RequestBody()
	if err != nil || !strings.Contains(string(up.Body), "context checkpoint compaction") {
		t.Fatalf("upstream %s, %v", up.Body, err)
	}
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody([]byte(anthropicSummary), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CompactResource", out)
	var c struct {
		ID, Object string
		Output     []json.RawMessage
		Usage      struct {
			InputTokens int64 `json:"input_tokens"`
		}
	}
	json.Unmarshal(out, &c)
	if c.ID != "resp_c1" || c.Object != "response.compaction" || len(c.Output) != 3 || c.Usage.InputTokens != 310 {
		t.Fatalf("compacted %s", out)
	}
	if !strings.Contains(string(c.Output[0]), "dog café") || !strings.Contains(string(c.Output[1]), "Now add a menu.") ||
		!strings.Contains(string(c.Output[2]), `"type":"compaction"`) {
		t.Errorf("output: want the two user messages and a compaction item: %s", out)
	}

	// The compacted conversation continues, bridged and on OpenAI.
	input, _ := json.Marshal(append(c.Output, json.RawMessage(`{"role":"user","content":"Go on."}`)))
	next, err := ParseRequest([]byte(`{"model":"m","input":` + string(input) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	chatReq, err := ToChat(next, nil)
	if err != nil {
		t.Fatal(err)
	}
	replayed := chatMessages(t, chatReq)
	if len(replayed) != 4 || !strings.Contains(replayed[2]["content"].([]any)[0].(map[string]any)["text"].(string), summaryIntro+"The user wants") {
		t.Errorf("replayed %v: want the user messages, the summary and the new turn", replayed)
	}
	upOpenAI, err := NewPassthrough(translate.Target{Model: "gpt-5"}, next, nil, "resp_n").RequestBody()
	if err != nil || strings.Contains(string(upOpenAI.Body), sealPrefix) || !strings.Contains(string(upOpenAI.Body), "Next: a menu.") {
		t.Errorf("to OpenAI: %s, %v: want the summary, not the gateway's compaction item", upOpenAI.Body, err)
	}
}

// OpenAI compacts natively: the request goes to its compact endpoint and
// its CompactResource comes back with the usage read.
func TestCompactPassthrough(t *testing.T) {
	r, err := ParseRequest([]byte(compactRequest))
	if err != nil {
		t.Fatal(err)
	}
	p := NewCompactPassthrough(translate.Target{Model: "gpt-5.1-codex-max", BasePath: "/openai"}, r, nil)
	up, err := p.RequestBody()
	if err != nil || up.Path != "/openai/v1/responses/compact" || !strings.Contains(string(up.Body), `"model":"gpt-5.1-codex-max"`) {
		t.Fatalf("upstream %s %s, %v", up.Path, up.Body, err)
	}
	// OpenAI's documented answer.
	answer := `{"id":"resp_001","object":"response.compaction","output":[` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"Create a landing page for a dog café."}]},` +
		`{"type":"compaction","id":"cmp_001","encrypted_content":"encrypted-summary"}],` +
		`"created_at":1731459200,"usage":{"input_tokens":42897,"output_tokens":12000,"total_tokens":54912}}`
	p.ResponseHeaders(200, "application/json")
	out, err := p.ResponseBody([]byte(answer), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CompactResource", out)
	if u := p.Usage(); u.PromptTokens != 42897 || u.CompletionTokens != 12000 {
		t.Errorf("usage %+v", u)
	}
	if !strings.Contains(string(out), `"encrypted_content":"encrypted-summary"`) {
		t.Errorf("OpenAI's compaction item changed: %s", out)
	}
}
