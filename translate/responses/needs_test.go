package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
)

// droppable is every capability a request can be served without.
var droppable = []api.Capability{api.CapTools, api.CapJSONSchema, api.CapReasoning}

// codexTurn is a request of Codex CLI's, some turns into a task: its
// instructions, the environment and the user's words, a reasoning item
// it got back encrypted (store is false), a shell call and its output;
// its tools, a reasoning effort, and the encrypted reasoning asked back.
const codexTurn = `{"model":"gpt-5.1-codex","instructions":"You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI on a user's computer.",
"input":[
 {"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>Filesystem sandboxing: workspace-write.</permissions instructions>"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/dev/modelgate</cwd>\n  <shell>bash</shell>\n</environment_context>"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the failing test in translate/api."}]},
 {"type":"reasoning","summary":[{"type":"summary_text","text":"**Running the tests**"}],"content":null,"encrypted_content":"gAAAAABpOpaque=="},
 {"type":"function_call","name":"shell_command","arguments":"{\"command\":\"go test ./translate/api/\",\"workdir\":\"/home/dev/modelgate\"}","call_id":"call_Q1"},
 {"type":"function_call_output","call_id":"call_Q1","output":"--- FAIL: TestChatNeeds (0.00s)\n    needs_test.go:42: \"input_image\" not found\nFAIL"}],
"tools":[{"type":"function","name":"shell_command","description":"Runs a shell command and returns its output.","strict":false,"parameters":{"type":"object","properties":{"command":{"type":"string"},"workdir":{"type":"string"},"timeout_ms":{"type":"number"}},"required":["command"],"additionalProperties":false}},
 {"type":"custom","name":"apply_patch","description":"Use the apply_patch tool to edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},
 {"type":"web_search"}],
"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},"store":false,"stream":true,
"include":["reasoning.encrypted_content"],"prompt_cache_key":"019a6f1e-7c2b","text":{"verbosity":"low"}}`

func TestNeeds(t *testing.T) {
	t.Parallel()
	image := `{"type":"message","role":"user","content":[{"type":"input_text","text":"What is this?"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"auto"}]}`
	tests := []struct {
		name    string
		body    string
		history []string
		want    api.Needs
	}{
		{"text", `{"model":"m","input":"hi","max_output_tokens":256}`, nil, api.Needs{MaxOutput: 256}},
		{"Codex", codexTurn, nil, api.Needs{Uses: []api.Capability{api.CapTools, api.CapReasoning}, Effort: "medium"}},
		{"image", `{"model":"m","input":[` + image + `]}`, nil, api.Needs{Uses: []api.Capability{api.CapImage}}},
		{"image in a stored turn", `{"model":"m","previous_response_id":"resp_1","input":"And now?"}`,
			[]string{image, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A cat."}]}`},
			api.Needs{Uses: []api.Capability{api.CapImage}}},
		{"file and audio", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"q3.pdf","file_data":"data:application/pdf;base64,JVBERi0="},` +
			`{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]}`, nil, api.Needs{Uses: []api.Capability{api.CapAudio, api.CapFile}}},
		{"image in a tool's output", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x/a.png"}]}]}`, nil,
			api.Needs{Uses: []api.Capability{api.CapImage}}},
		{"screenshot", `{"model":"m","input":[{"type":"computer_call_output","call_id":"c","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,iVBO"}}]}`, nil,
			api.Needs{Uses: []api.Capability{api.CapImage}}},
		{"prompt variable", `{"model":"m","input":"Sum it up.","prompt":{"id":"pmpt_1","variables":{"doc":{"type":"input_file","file_id":"file-1"},"name":"Ann"}}}`, nil,
			api.Needs{Uses: []api.Capability{api.CapFile}}},
		{"a type spelled with an escape", `{"model":"m","input":[{"role":"user","content":[{"type":"input\u005fimage","image_url":"https://x/a.png"}]}]}`, nil,
			api.Needs{Uses: []api.Capability{api.CapImage}}},
		{"json schema", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object"}},"verbosity":"low"}}`, nil,
			api.Needs{Uses: []api.Capability{api.CapJSONSchema}}},
		{"json object", `{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}`, nil, api.Needs{}},
		{"effort none", `{"model":"m","input":"hi","reasoning":{"effort":"none"}}`, nil, api.Needs{Effort: "none"}},
		{"a summary without an effort", `{"model":"m","input":"hi","reasoning":{"summary":"auto"}}`, nil, api.Needs{Uses: []api.Capability{api.CapReasoning}}},
		{"encrypted reasoning alone", `{"model":"m","input":"hi","include":["message.output_text.logprobs","reasoning.encrypted_content"]}`, nil,
			api.Needs{Uses: []api.Capability{api.CapReasoning}}},
		{"empty tools", `{"model":"m","input":"hi","tools":[]}`, nil, api.Needs{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.Needs(items(tt.history))); diff != "" {
				t.Errorf("Needs of %s (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

func items(raw []string) []json.RawMessage {
	var out []json.RawMessage
	for _, it := range raw {
		out = append(out, json.RawMessage(it))
	}
	return out
}

func TestWithout(t *testing.T) {
	t.Parallel()
	const schema = `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object"}},"verbosity":"low"},` +
		`"reasoning":{"effort":"none"},"include":["reasoning.encrypted_content","message.output_text.logprobs"]}`
	tests := []struct {
		name   string
		body   string
		drop   []api.Capability
		gone   []string
		edited map[string]string
		left   api.LeftOut
	}{
		{name: "Codex without reasoning", body: codexTurn, drop: []api.Capability{api.CapReasoning}, gone: []string{"reasoning", "include"},
			left: api.LeftOut{"reasoning", "include reasoning.encrypted_content"}},
		{name: "Codex without tools", body: codexTurn, drop: []api.Capability{api.CapTools}, gone: []string{"tools", "tool_choice", "parallel_tool_calls"},
			left: api.LeftOut{"tools", "tool_choice", "parallel_tool_calls"}},
		{name: "Codex without all", body: codexTurn, drop: droppable, gone: []string{"reasoning", "include", "tools", "tool_choice", "parallel_tool_calls"},
			left: api.LeftOut{"reasoning", "include reasoning.encrypted_content", "tools", "tool_choice", "parallel_tool_calls"}},
		{name: "json schema and encrypted reasoning", body: schema, drop: droppable,
			edited: map[string]string{"text": `{"verbosity":"low"}`, "include": `["message.output_text.logprobs"]`},
			left:   api.LeftOut{"include reasoning.encrypted_content", "text.format"}},
		{name: "only the format", body: `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{}}}}`, drop: []api.Capability{api.CapJSONSchema},
			gone: []string{"text"}, left: api.LeftOut{"text.format"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			out, left, err := r.Without(tt.drop, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for name, v := range r.Members {
				switch edited, ok := tt.edited[name]; {
				case slices.Contains(tt.gone, name):
				case ok:
					want[name] = edited
				default:
					want[name] = string(v)
				}
			}
			got := map[string]string{}
			for name, v := range out.Members {
				got[name] = string(v)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("members (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.left, left); diff != "" {
				t.Errorf("left out (-want +got):\n%s", diff)
			}
			checkServedWithout(t, r, out, nil, tt.drop)
		})
	}
}

// checkServedWithout checks a request Without(drop) made of r: it parses
// again, uses what r used but drop, and, when it lost its tools, offers
// a chat model none.
func checkServedWithout(t *testing.T, r, out *Request, history []json.RawMessage, drop []api.Capability) {
	t.Helper()
	body, err := json.Marshal(out.Members)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseRequest(body)
	if err != nil {
		t.Fatalf("the request does not parse again: %v\n%s", err, body)
	}
	var want []api.Capability
	for _, c := range r.Needs(history).Uses {
		if !slices.Contains(drop, c) {
			want = append(want, c)
		}
	}
	if diff := cmp.Diff(want, again.Needs(history).Uses); diff != "" {
		t.Errorf("uses after Without(%v) (-want +got):\n%s", drop, diff)
	}
	if !again.Needs(history).Has(api.CapTools) && len(out.tools.chat) > 0 {
		t.Errorf("tools %s left for the chat model", out.tools.chat)
	}
}

// A request that uses nothing drop names is served as it is, the same
// request; what cannot be left out is never.
func TestWithoutNothingToDrop(t *testing.T) {
	t.Parallel()
	r, err := ParseRequest([]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png"}]}],` +
		`"reasoning":{"effort":"none"},"tools":[],"text":{"format":{"type":"text"}},"include":["message.output_text.logprobs"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if out, left, err := r.Without(droppable, nil); out != r || left != nil || err != nil {
		t.Errorf("%p %v %v, want %p", out, left, err, r)
	}
	for _, c := range []api.Capability{api.CapImage, api.CapAudio, api.CapFile} {
		if _, _, err := r.Without([]api.Capability{c}, nil); err == nil {
			t.Errorf("without %s: no error", c)
		}
	}
}

// Whatever a client sends that parses, Needs reads it (its input items
// taken for a stored conversation too), and Without of all that can go
// makes a request that parses again and uses nothing of it, but what it
// used besides.
func FuzzNeeds(f *testing.F) {
	for _, body := range []string{codexTurn, codexRequest,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input\u005fimage"}],"Content":null}],"text":{"Format":{"type":"json_schema"}},"include":["reasoning.encrypted_content"]}`,
		`{"model":"m","input":[{"type":"computer_call_output","output":{"type":"computer_screenshot"}}],"prompt":{"variables":{"a":{"type":"input_file"}}},"reasoning":{"EFFORT":"none"}}`,
		`{"model":"m","input":"x","prompt":{"variables":[{"type":"input_image"}]},"tools":[{"type":"function","name":"f"}],"max_tool_calls":3}`} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body)
		if err != nil {
			return
		}
		var history []json.RawMessage
		json.Unmarshal(r.Members["input"], &history) //nolint:errcheck // input that is no array is no history
		out, _, err := r.Without(droppable, history)
		if err != nil {
			t.Fatalf("Without of %s: %v", body, err)
		}
		checkServedWithout(t, r, out, history, droppable)
		if jsonscan.AmbiguousKeys(body) {
			return // encoding/json and the providers read it differently
		}
		var got api.CapSet
		for _, c := range r.Needs(nil).Uses {
			if !c.Droppable() {
				got.Add(c)
			}
		}
		if want := referenceInputs(history, r.Members["prompt"]); got != want {
			t.Errorf("inputs of %s: %b, want %b", body, got, want)
		}
	})
}

// referenceInputs is what Needs finds in the input items and the prompt,
// as encoding/json reads the parts into structs, without the search that
// skips most items.
func referenceInputs(items []json.RawMessage, prompt json.RawMessage) api.CapSet {
	var uses api.CapSet
	part := func(raw json.RawMessage) {
		var p struct{ Type string }
		json.Unmarshal(raw, &p) //nolint:errcheck // what is of another type is left out, the rest read
		switch p.Type {
		case "input_image", "computer_screenshot":
			uses.Add(api.CapImage)
		case "input_audio":
			uses.Add(api.CapAudio)
		case "input_file":
			uses.Add(api.CapFile)
		}
	}
	var p struct{ Variables map[string]json.RawMessage }
	json.Unmarshal(prompt, &p) //nolint:errcheck // a prompt of another shape has no variables
	for _, v := range p.Variables {
		part(v)
	}
	for _, it := range items {
		var item struct{ Content, Output json.RawMessage }
		json.Unmarshal(it, &item) //nolint:errcheck
		for _, v := range []json.RawMessage{item.Content, item.Output} {
			var parts []json.RawMessage
			if json.Unmarshal(v, &parts) != nil {
				if jsonscan.Kind(v) == jsonscan.Object {
					part(v)
				}
				continue
			}
			for _, p := range parts {
				part(p)
			}
		}
	}
	return uses
}

// codexSession is a Codex request some turns into a task, about 20 KB:
// codexTurn with a dozen more shell calls and their outputs.
func codexSession() []byte {
	var more []string
	for i := range 12 {
		more = append(more,
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"**Reading the code**"}],"content":null,"encrypted_content":"`+strings.Repeat("gAAAAABpOpaque", 20)+`"}`,
			fmt.Sprintf(`{"type":"function_call","name":"shell_command","arguments":"{\"command\":\"sed -n 1,40p file%d.go\"}","call_id":"call_%d"}`, i, i),
			fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":"%s"}`, i, strings.Repeat(`package api\n\nfunc main() { println(\"hi\") }\n`, 20)))
	}
	return []byte(strings.Replace(codexTurn, `"Fix the failing test in translate/api."}]},`,
		`"Fix the failing test in translate/api."}]},`+strings.Join(more, ",")+",", 1))
}

func BenchmarkNeeds(b *testing.B) {
	body := codexSession()
	r, err := ParseRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("codex-%dKB", len(body)>>10), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if n := r.Needs(nil); len(n.Uses) != 2 {
				b.Fatal(n)
			}
		}
	})
	var history []json.RawMessage
	if err := json.Unmarshal(r.Members["input"], &history); err != nil {
		b.Fatal(err)
	}
	b.Run("codex-continued", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if n := r.Needs(history); len(n.Uses) != 2 {
				b.Fatal(n)
			}
		}
	})
}

// Tools offered by additional_tools items (Codex's code mode), in the
// input or the stored conversation, are tools the request uses; served
// without tools, it offers none of them, bridged or passed through.
func TestWithoutItemTools(t *testing.T) {
	history := []json.RawMessage{json.RawMessage(`{"type":"additional_tools","role":"developer","tools":[{"type":"function","name":"g"}]}`),
		json.RawMessage(`{"type":"message","role":"user","content":"earlier"}`)}
	r, err := ParseRequest([]byte(`{"model":"m","previous_response_id":"resp_1","input":[
		{"type":"additional_tools","role":"developer","tools":[{"type":"custom","name":"exec"}]},{"type":"message","role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Needs(nil).Has(api.CapTools) || !r.Needs(history).Has(api.CapTools) {
		t.Fatal("the items' tools are not counted")
	}
	out, left, err := r.Without([]api.Capability{api.CapTools}, history)
	if err != nil || !slices.Contains(left, "additional_tools") || bytes.Contains(out.Members["input"], []byte("exec")) {
		t.Fatalf("Without tools: %v %v, input %s", left, err, out.Members["input"])
	}
	if out.Needs(history).Has(api.CapTools) {
		t.Error("served without tools, it still uses the history's")
	}
	chat, err := ToChat(out, history)
	if err != nil || chat.Members["tools"] != nil {
		t.Errorf("bridged: tools %s, %v", chat.Members["tools"], err)
	}
	up, err := NewPassthrough(translate.Target{Model: "m"}, out, history, "resp_2").RequestBody()
	if err != nil || bytes.Contains(up.Body, []byte("additional_tools")) || !bytes.Contains(up.Body, []byte("earlier")) {
		t.Errorf("passed through: %s, %v", up.Body, err)
	}
	// Nothing to leave out when the conversation offers no tools.
	plain, _ := ParseRequest([]byte(`{"model":"m","input":"hi"}`))
	if out, left, err := plain.Without([]api.Capability{api.CapTools}, history[1:]); out != plain || left != nil || err != nil {
		t.Errorf("a request without tools: %p %v %v", out, left, err)
	}
}
