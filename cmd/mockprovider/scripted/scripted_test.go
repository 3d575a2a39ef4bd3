package scripted

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/translate/bedrock"
)

func TestAnswerRules(t *testing.T) {
	shell := Tool{Name: "exec_command", Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"},"timeout":{"type":"integer"}},"required":["cmd"]}`)}
	other := Tool{Name: "get_secret", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)}
	answer := Tool{Name: "json_response", Parameters: json.RawMessage(`{"type":"object","properties":{"secret":{"type":"string"},"ok":{"type":"boolean"}},"required":["secret","ok"]}`)}
	tests := []struct {
		name string
		c    Conversation
		call string // the call's name and arguments, or the text
	}{
		{"prefers a shell", Conversation{Prompt: "Run `ls -la` please", Tools: []Tool{other, shell}}, `exec_command {"cmd":"ls -la"}`},
		{"fills strings from the backticks", Conversation{Prompt: "Secret under `k1`?", Tools: []Tool{other}}, `get_secret {"name":"k1"}`},
		{"answers with the result", Conversation{Prompt: "x", Tools: []Tool{other}, Results: []string{"42"}}, "The tool said: 42"},
		{"a required call after the result is the last tool", Conversation{Prompt: "x", Tools: []Tool{other, answer}, MustCall: true, Results: []string{"s3"}}, `json_response {"ok":true,"secret":"s3"}`},
		{"JSON from the schema", Conversation{Prompt: "x", Results: []string{"v"}, Schema: answer.Parameters}, `{"ok":true,"secret":"v"}`},
		{"no tools", Conversation{Prompt: "hello"}, "You said: hello"},
		{"a freeform tool gets the text", Conversation{Prompt: "apply `patch`", Tools: []Tool{{Name: "apply_patch"}}}, "apply_patch patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := Answer(tt.c)
			got := turn.Text
			if turn.Call != nil {
				got = turn.Call.Name + " " + turn.Call.Arguments
			}
			if got != tt.call {
				t.Errorf("got %q, want %q", got, tt.call)
			}
			if turn.Thinking != "" {
				t.Errorf("thinking %q with reasoning off", turn.Thinking)
			}
		})
	}
	turn := Answer(Conversation{Prompt: "x", Reasoning: true})
	if turn.Thinking == "" || !Verify(turn.Thinking, turn.Signature) || Verify(turn.Thinking+".", turn.Signature) {
		t.Errorf("thinking %q signed %q", turn.Thinking, turn.Signature)
	}
}

// Claude refuses a tool loop turn whose thinking is missing or not its
// own, with thinking on; the same turn with the model's signed thinking
// goes on.
func TestMessagesChecksThinking(t *testing.T) {
	first := httptest.NewRecorder()
	Messages(first, []byte(`{"model":"m","thinking":{"type":"enabled","budget_tokens":1024},"tools":[{"name":"get_secret","input_schema":{"type":"object","properties":{"name":{"type":"string"}}}}],"messages":[{"role":"user","content":"Secret under `+"`a`"+`?"}]}`))
	var msg struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(first.Body.Bytes(), &msg); err != nil || len(msg.Content) != 2 || !bytes.Contains(msg.Content[0], []byte(`"signature"`)) {
		t.Fatalf("first turn %s: want signed thinking and a tool call", first.Body)
	}
	var use struct{ ID string }
	json.Unmarshal(msg.Content[1], &use)
	next := func(assistant string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		Messages(w, []byte(`{"model":"m","thinking":{"type":"enabled","budget_tokens":1024},"tools":[{"name":"get_secret","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Secret under `+"`a`"+`?"},{"role":"assistant","content":[`+assistant+`]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+use.ID+`","content":"s1"}]}]}`))
		return w
	}
	if w := next(string(msg.Content[0]) + "," + string(msg.Content[1])); w.Code != 200 || !strings.Contains(w.Body.String(), "The tool said: s1") {
		t.Errorf("with its thinking: %d %s", w.Code, w.Body)
	}
	if w := next(string(msg.Content[1])); w.Code != 400 || !strings.Contains(w.Body.String(), "Expected `thinking` or `redacted_thinking`, but found `tool_use`") {
		t.Errorf("without its thinking: %d %s", w.Code, w.Body)
	}
	forged := strings.Replace(string(msg.Content[0]), "I will call", "I shall call", 1)
	if w := next(forged + "," + string(msg.Content[1])); w.Code != 400 || !strings.Contains(w.Body.String(), "Invalid `signature`") {
		t.Errorf("with altered thinking: %d %s", w.Code, w.Body)
	}
}

// Offered Anthropic's web search tool, Claude searches once before it
// answers, never calls the tool as the client's, and counts the search in
// its usage: the message's, and the stream's message_delta (not its
// message_start). Without the tool it does not search.
func TestMessagesWebSearch(t *testing.T) {
	const search = `{"model":"m","max_tokens":100,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":2}],"messages":[{"role":"user","content":"Who won Euro 2024?"}]`
	w := httptest.NewRecorder()
	Messages(w, []byte(search+`}`))
	var msg struct {
		Content []struct{ Type, Name, Text string }
		Usage   struct {
			ServerToolUse *struct {
				WebSearchRequests int `json:"web_search_requests"`
			} `json:"server_tool_use"`
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || len(msg.Content) != 3 || msg.Content[0].Type != "server_tool_use" ||
		msg.Content[0].Name != "web_search" || msg.Content[1].Type != "web_search_tool_result" || msg.Content[2].Type != "text" ||
		msg.Usage.ServerToolUse == nil || msg.Usage.ServerToolUse.WebSearchRequests != 1 {
		t.Errorf("message %s: want a search, its result and text, and 1 web search in the usage", w.Body)
	}
	w = httptest.NewRecorder()
	Messages(w, []byte(search+`,"stream":true}`))
	var start, delta string
	for _, line := range strings.Split(w.Body.String(), "\n") {
		switch {
		case strings.Contains(line, `"type":"message_start"`):
			start = line
		case strings.Contains(line, `"type":"message_delta"`):
			delta = line
		}
	}
	if strings.Contains(start, "server_tool_use") || !strings.Contains(delta, `"server_tool_use":{"web_search_requests":1}`) ||
		!strings.Contains(w.Body.String(), `"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_scripted`) {
		t.Errorf("stream:\n%s", w.Body)
	}
	w = httptest.NewRecorder()
	Messages(w, []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Who won Euro 2024?"}]}`))
	if strings.Contains(w.Body.String(), "server_tool_use") {
		t.Errorf("searched without the tool: %s", w.Body)
	}
}

// The Converse stream is AWS's event-stream, as the gateway's decoder
// reads it.
func TestConverseStreamFrames(t *testing.T) {
	w := httptest.NewRecorder()
	Converse(w, true, []byte(`{"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},"messages":[{"role":"user","content":[{"text":"hi"}]}]}`))
	var d bedrock.Decoder
	msgs, err := d.Feed(w.Body.Bytes())
	if err != nil || d.Pending() {
		t.Fatalf("decoding: %v (pending %v)", err, d.Pending())
	}
	var types []string
	for _, m := range msgs {
		types = append(types, m.Header(":event-type"))
	}
	want := "messageStart contentBlockDelta contentBlockDelta contentBlockDelta contentBlockDelta contentBlockStop contentBlockDelta contentBlockDelta contentBlockDelta contentBlockStop messageStop metadata"
	if strings.Join(types, " ") != want {
		t.Errorf("events %v, want %s", types, want)
	}
}

// Gemini 3 refuses a function call of the current turn sent back without
// its thought signature.
func TestGeminiChecksThoughtSignatures(t *testing.T) {
	body := func(sig string) []byte {
		return []byte(`{"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object"}}]}],"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}` + sig + `}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"r1"}}}]}]}`)
	}
	w := httptest.NewRecorder()
	Gemini(w, false, "g", body(`,"thoughtSignature":"`+callSignature("f")+`"`))
	if w.Code != 200 || !strings.Contains(w.Body.String(), "The tool said: r1") {
		t.Errorf("signed: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	Gemini(w, false, "g", body(""))
	if w.Code != 400 || !strings.Contains(w.Body.String(), "missing a thought_signature") {
		t.Errorf("unsigned: %d %s", w.Code, w.Body)
	}
}
