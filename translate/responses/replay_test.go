package responses

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// A client continues a conversation by sending the output it got back as
// input, or by previous_response_id, which replays the stored output:
// whatever the gateway answered a Responses client with must be taken
// back, onto every provider.

// replayProviders are the chat translators a conversation may continue
// on: a bridged Response's output goes to any of them next (fallback, a
// change of model).
var replayProviders = []struct {
	name string
	chat chatFactory
}{
	{"openai", openai.NewChat}, {"mistral", openai.NewCompatibleChat(openai.CompatibleProviders()["mistral"])},
	{"anthropic", anthropic.NewChat}, {"gemini", gemini.NewChat}, {"bedrock", bedrock.NewChat}, {"cohere", cohere.NewChat},
}

// replayTools are the tools of madeOutput's request, and of the turn
// after it.
const replayTools = `[{"type":"custom","name":"apply_patch"},{"type":"namespace","name":"mcp__github__","description":"GitHub.",` +
	`"tools":[{"type":"function","name":"get_issue","parameters":{"type":"object","properties":{"n":{"type":"integer"}}}}]}]`

// TestOwnOutputReplays continues each completed Response of the golden
// cases, and madeOutput's, with its output as the next request's input
// and as the stored conversation: every provider's chat translator takes
// the request.
func TestOwnOutputReplays(t *testing.T) {
	outputs := goldenOutputs(t)
	outputs["made"] = madeOutput(t)
	for name, output := range outputs {
		for _, p := range replayProviders {
			t.Run(name+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				history := slices.Concat([]json.RawMessage{json.RawMessage(`{"role":"user","content":"Hi"}`)}, output, callOutputs(t, output))
				next := json.RawMessage(`{"role":"user","content":"Go on."}`)
				asInput := mustJSON(map[string]any{"model": "m", "tools": json.RawMessage(replayTools), "input": append(slices.Clone(history), next)})
				continued := mustJSON(map[string]any{"model": "m", "tools": json.RawMessage(replayTools), "previous_response_id": "resp_1", "input": "Go on."})
				for _, c := range []struct {
					body    []byte
					history []json.RawMessage
				}{{asInput, nil}, {continued, history}} {
					r, err := ParseRequest(c.body)
					if err != nil {
						t.Fatal(err)
					}
					req, err := ToChat(r, c.history)
					if err != nil {
						t.Fatalf("ToChat (history %v): %v\ninput %s", c.history != nil, err, history)
					}
					up, err := p.chat(translate.Target{Provider: p.name, Model: "m"}, req).RequestBody()
					if err != nil {
						t.Fatalf("RequestBody (history %v): %v\nchat request %s", c.history != nil, err, req.Members["messages"])
					}
					checkCarries(t, up.Body, messageTexts(t, output))
				}
			})
		}
	}
}

// goldenOutputs are the output items of each completed Response a golden
// case gave its client (client.json, or the Response a stream's last
// event carries), by case.
func goldenOutputs(t *testing.T) map[string][]json.RawMessage {
	t.Helper()
	files, err := filepath.Glob("testdata/*/client.*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]json.RawMessage{}
	for _, f := range files {
		body := translatetest.ReadFile(t, f)
		if filepath.Ext(f) == ".sse" {
			body = lastResponse(body)
		}
		var resp struct {
			Status string
			Output []json.RawMessage
		}
		if json.Unmarshal(body, &resp) == nil && (resp.Status == "completed" || resp.Status == "incomplete") {
			out[filepath.Base(filepath.Dir(f))] = resp.Output
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d completed Responses under testdata", len(out))
	}
	return out
}

// lastResponse is the Response a stream's last event carries, nil when it
// carries none.
func lastResponse(stream []byte) []byte {
	var d sse.Decoder
	events := d.Feed(stream)
	if len(events) == 0 {
		return nil
	}
	var ev struct{ Response json.RawMessage }
	json.Unmarshal(events[len(events)-1].Data, &ev) //nolint:errcheck // not a Response: nil
	return ev.Response
}

// madeOutput is the output of a bridged answer with what the golden
// cases' answers lack: thinking that must go back (a reasoning item's
// encrypted_content), a web search's url_citation annotations, a custom
// tool's call and a namespaced function's.
func madeOutput(t *testing.T) []json.RawMessage {
	t.Helper()
	r, err := ParseRequest([]byte(`{"model":"m","input":"Hi","tools":` + replayTools + `}`))
	if err != nil {
		t.Fatal(err)
	}
	chat := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"Paris is sunny.","refusal":null,"reasoning_content":"Check.","thinking_blocks":[{"type":"thinking","thinking":"Check.","signature":"sig"}],` +
		`"annotations":[{"type":"url_citation","url_citation":{"start_index":0,"end_index":5,"url":"https://example.com/paris","title":"Paris"}}],` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"mcp__github__get_issue","arguments":"{\"n\":1}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	body, err := FromChat(r, []byte(chat), "resp_1", 1)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct{ Output []json.RawMessage }
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Output
}

// callOutputs are the results a client sends for the tool calls among
// items.
func callOutputs(t *testing.T, items []json.RawMessage) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, raw := range items {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatal(err)
		}
		switch it.Type {
		case "function_call", "custom_tool_call":
			out = append(out, mustJSON(map[string]any{"type": it.Type + "_output", "call_id": it.CallID, "output": "done"}))
		}
	}
	return out
}

// messageTexts are the texts and refusals of the messages among items.
func messageTexts(t *testing.T, items []json.RawMessage) []string {
	t.Helper()
	var texts []string
	for _, raw := range items {
		var it struct {
			Type    string `json:"type"`
			Content []struct {
				Text    string `json:"text"`
				Refusal string `json:"refusal"`
			} `json:"content"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatal(err)
		}
		for _, p := range it.Content {
			if it.Type == "message" && p.Text+p.Refusal != "" {
				texts = append(texts, p.Text+p.Refusal)
			}
		}
	}
	return texts
}

// checkCarries requires each of texts in a string of the JSON body: the
// provider is told what the assistant said, refusals included.
func checkCarries(t *testing.T, body []byte, texts []string) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("upstream body: %v", err)
	}
	var all []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			all = append(all, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	for _, text := range texts {
		if !slices.ContainsFunc(all, func(s string) bool { return strings.Contains(s, text) }) {
			t.Errorf("the upstream body lacks the assistant's %q:\n%s", text, body)
		}
	}
}
