package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate/jsonscan"
)

// droppable is every capability a request can be served without.
var droppable = []Capability{CapTools, CapJSONSchema, CapReasoning}

// agentChat is an agent's chat request, as the OpenAI SDKs send one: a
// system prompt, a user turn with a screenshot, earlier tool calls and
// their results, tools, a structured answer and a reasoning effort.
const agentChat = `{"model":"gpt-5-mini","messages":[
 {"role":"system","content":"You are a careful assistant. Answer with the schema."},
 {"role":"user","content":[{"type":"text","text":"What is on the screen, and what is the weather there?"},
   {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]},
 {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
 {"role":"tool","tool_call_id":"call_1","content":"18°C, cloudy; the \"image_url\" part is a screenshot"}],
"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}],
"tool_choice":"auto","parallel_tool_calls":false,
"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}}},
"reasoning_effort":"high","max_completion_tokens":4096,"stream":true,"stream_options":{"include_usage":true},"store":false}`

func TestChatNeeds(t *testing.T) {
	t.Parallel()
	user := func(content string) string {
		return `{"model":"m","messages":[{"role":"user","content":` + content + `}]`
	}
	tests := []struct {
		name string
		body string
		want Needs
	}{
		{"text", user(`"hi"`) + `,"max_tokens":50}`, Needs{MaxOutput: 50}},
		{"agent", agentChat, Needs{Uses: []Capability{CapImage, CapTools, CapJSONSchema, CapReasoning}, Effort: "high", MaxOutput: 4096}},
		// chat-multimodal of envoyproxy/ai-gateway's cassettes (../fixtures/openai/chat).
		{"recorded multimodal", `{"max_completion_tokens":100,"messages":[{"content":[{"text":"What is in this image?","type":"text"},` +
			`{"image_url":{"url":"https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/Gfp-wisconsin-madison-the-nature-boardwalk.jpg/2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg"},"type":"image_url"}],` +
			`"role":"user"}],"model":"gpt-5-nano"}`, Needs{Uses: []Capability{CapImage}, MaxOutput: 100}},
		{"audio and file in a later turn", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},` +
			`{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},` +
			`{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]}]}`,
			Needs{Uses: []Capability{CapAudio, CapFile}}},
		{"a type spelled with an escape", user(`[{"type":"image\u005furl","image_url":{"url":"https://x/a.png"}}]`) + `}`, Needs{Uses: []Capability{CapImage}}},
		{"a key in another case", user(`[{"Type":"file","file":{"file_id":"file-1"}}]`) + `}`, Needs{Uses: []Capability{CapFile}}},
		{"the words in text only", user(`[{"type":"text","text":"\"image_url\", \"input_audio\" and \"file\" parts"}]`) + `}`, Needs{}},
		{"empty tools", user(`"hi"`) + `,"tools":[],"tool_choice":"none"}`, Needs{}},
		{"tool_choice none", user(`"hi"`) + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, Needs{Uses: []Capability{CapTools}}},
		{"legacy functions", user(`"hi"`) + `,"functions":[{"name":"f","parameters":{}}],"function_call":"auto"}`, Needs{Uses: []Capability{CapTools}}},
		{"json_object", user(`"hi"`) + `,"response_format":{"type":"json_object"}}`, Needs{}},
		{"reasoning_effort none", user(`"hi"`) + `,"reasoning_effort":"none"}`, Needs{Effort: "none"}},
		{"reasoning_effort none, reasoning on", user(`"hi"`) + `,"reasoning_effort":"none","reasoning":{"effort":"minimal"}}`,
			Needs{Uses: []Capability{CapReasoning}, Effort: "minimal"}},
		{"reasoning object", user(`"hi"`) + `,"reasoning":{"effort":"low"}}`, Needs{Uses: []Capability{CapReasoning}, Effort: "low"}},
		{"reasoning turned off", user(`"hi"`) + `,"reasoning":{"enabled":false}}`, Needs{}},
		{"max_tokens", user(`"hi"`) + `,"max_tokens":7,"max_completion_tokens":9}`, Needs{MaxOutput: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseChatRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.Needs()); diff != "" {
				t.Errorf("Needs of %s (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

// claudeCode is a request of Claude Code's, an agent's Messages request:
// a system prompt with cache markers, tools, thinking on every request,
// and a conversation of tool calls, one of whose results is a
// screenshot.
const claudeCode = `{"model":"claude-sonnet-4-5-20250929","messages":[
 {"role":"user","content":[{"type":"text","text":"<system-reminder>\nThis is a reminder that your todo list is currently empty.\n</system-reminder>"},{"type":"text","text":"Why does the page look broken?","cache_control":{"type":"ephemeral"}}]},
 {"role":"assistant","content":[{"type":"thinking","thinking":"I should look at the page.","signature":"EqQBCkYIBxgCKkBsig=="},{"type":"tool_use","id":"toolu_01A","name":"Bash","input":{"command":"npx playwright screenshot http://localhost:3000 shot.png","description":"Take a screenshot"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":[{"type":"text","text":"Saved shot.png"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}],
"temperature":1,
"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"You are an interactive CLI tool that helps users with software engineering tasks.","cache_control":{"type":"ephemeral"}}],
"tools":[{"name":"Bash","description":"Executes a given bash command in a persistent shell session.","input_schema":{"type":"object","properties":{"command":{"type":"string","description":"The command to execute"},"timeout":{"type":"number"},"description":{"type":"string"}},"required":["command"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}},
  {"name":"Read","description":"Reads a file from the local filesystem.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"offset":{"type":"number"},"limit":{"type":"number"}},"required":["file_path"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}}],
"metadata":{"user_id":"user_2f1c_account_9a0e_session_51d4"},"max_tokens":32000,"thinking":{"budget_tokens":31999,"type":"enabled"},"stream":true}`

// claudeCodeAdaptive is the newer Claude Code's request: adaptive
// thinking with an effort, and thinking blocks cleared by context
// management.
const claudeCodeAdaptive = `{"model":"claude-opus-4-6","max_tokens":64000,"messages":[{"role":"user","content":"Rename the package."}],
"system":[{"type":"text","text":"You are Claude Code."}],"tools":[{"name":"Edit","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},
"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},
"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"},{"type":"clear_tool_uses_20250919"}]},"stream":true}`

func TestMessagesNeeds(t *testing.T) {
	t.Parallel()
	turn := func(content string) string {
		return `{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":` + content + `}]`
	}
	tests := []struct {
		name string
		body string
		want Needs
	}{
		{"text", turn(`"hi"`) + `}`, Needs{MaxOutput: 1024}},
		{"Claude Code", claudeCode, Needs{Uses: []Capability{CapImage, CapTools, CapReasoning}, MaxOutput: 32000}},
		{"Claude Code, adaptive", claudeCodeAdaptive, Needs{Uses: []Capability{CapTools, CapReasoning}, Effort: "high", MaxOutput: 64000}},
		{"PDF", turn(`[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}},{"type":"text","text":"Sum it up."}]`) + `}`,
			Needs{Uses: []Capability{CapFile}, MaxOutput: 1024}},
		{"plain text document", turn(`[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}}]`) + `}`, Needs{MaxOutput: 1024}},
		{"document in a tool result", turn(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]`) + `}`,
			Needs{Uses: []Capability{CapFile}, MaxOutput: 1024}},
		{"the word in a tool's input", turn(`[{"type":"tool_use","id":"t","name":"f","input":{"type":"image"}}]`) + `}`, Needs{MaxOutput: 1024}},
		{"server tools", turn(`"hi"`) + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, Needs{Uses: []Capability{CapTools}, MaxOutput: 1024}},
		{"output_format", turn(`"hi"`) + `,"output_format":{"type":"json_schema","schema":{"type":"object"}}}`, Needs{Uses: []Capability{CapJSONSchema}, MaxOutput: 1024}},
		{"output_config.format", turn(`"hi"`) + `,"output_config":{"format":{"type":"json_schema","schema":{}}}}`, Needs{Uses: []Capability{CapJSONSchema}, MaxOutput: 1024}},
		{"thinking disabled", turn(`"hi"`) + `,"thinking":{"type":"disabled"}}`, Needs{MaxOutput: 1024}},
		{"effort alone", turn(`"hi"`) + `,"output_config":{"effort":"low"}}`, Needs{Uses: []Capability{CapReasoning}, Effort: "low", MaxOutput: 1024}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseMessagesRequest([]byte(tt.body), false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.Needs()); diff != "" {
				t.Errorf("Needs of %s (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

// withoutCase is a request served without some capabilities: the members
// that go, those edited (with their new value) and the warning's words.
type withoutCase struct {
	name   string
	body   string
	drop   []Capability
	gone   []string
	edited map[string]string
	left   LeftOut
}

func TestChatWithout(t *testing.T) {
	t.Parallel()
	tests := []withoutCase{
		{name: "reasoning", body: agentChat, drop: []Capability{CapReasoning}, gone: []string{"reasoning_effort"}, left: LeftOut{"reasoning_effort"}},
		{name: "tools", body: agentChat, drop: []Capability{CapTools},
			gone: []string{"tools", "tool_choice", "parallel_tool_calls"}, left: LeftOut{"tools", "tool_choice", "parallel_tool_calls"}},
		{name: "json schema", body: agentChat, drop: []Capability{CapJSONSchema}, gone: []string{"response_format"}, left: LeftOut{"response_format"}},
		{name: "all", body: agentChat, drop: droppable,
			gone: []string{"reasoning_effort", "tools", "tool_choice", "parallel_tool_calls", "response_format"},
			left: LeftOut{"reasoning_effort", "tools", "tool_choice", "parallel_tool_calls", "response_format"}},
		{name: "legacy functions and reasoning", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}],"function_call":"auto",` +
			`"reasoning":{"effort":"high"},"reasoning_effort":null}`, drop: droppable,
			gone: []string{"functions", "function_call", "reasoning"}, left: LeftOut{"reasoning", "functions", "function_call"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseChatRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			out, left, err := r.Without(tt.drop)
			if err != nil {
				t.Fatal(err)
			}
			checkWithout(t, tt, r.Body, out.Body, left)
			again, err := ParseChatRequest(out.Body)
			if err != nil {
				t.Fatalf("the body does not parse again: %v\n%s", err, out.Body)
			}
			checkDropped(t, r.Needs(), again.Needs(), tt.drop)
		})
	}
}

func TestMessagesWithout(t *testing.T) {
	t.Parallel()
	const schema = `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"output_format":{"type":"json_schema","schema":{}},` +
		`"output_config":{"format":{"type":"json_schema","schema":{}},"effort":"low"}}`
	tests := []withoutCase{
		{name: "Claude Code without thinking", body: claudeCode, drop: []Capability{CapReasoning}, gone: []string{"thinking"}, left: LeftOut{"thinking"}},
		{name: "Claude Code without tools", body: claudeCode, drop: []Capability{CapTools}, gone: []string{"tools"}, left: LeftOut{"tools"}},
		{name: "adaptive without thinking", body: claudeCodeAdaptive, drop: []Capability{CapReasoning}, gone: []string{"thinking", "output_config"},
			edited: map[string]string{"context_management": `{"edits":[{"type":"clear_tool_uses_20250919"}]}`},
			left:   LeftOut{"thinking", "context_management clear_thinking", "output_config.effort"}},
		{name: "adaptive without all", body: claudeCodeAdaptive, drop: droppable, gone: []string{"thinking", "output_config", "tools", "tool_choice"},
			edited: map[string]string{"context_management": `{"edits":[{"type":"clear_tool_uses_20250919"}]}`},
			left:   LeftOut{"thinking", "context_management clear_thinking", "output_config.effort", "tools", "tool_choice"}},
		{name: "json schema, effort kept", body: schema, drop: []Capability{CapJSONSchema}, gone: []string{"output_format"},
			edited: map[string]string{"output_config": `{"effort":"low"}`}, left: LeftOut{"output_format", "output_config.format"}},
		{name: "only clear_thinking", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024},` +
			`"context_management":{"edits":[{"type":"clear_thinking_20251015"}]}}`, drop: droppable, gone: []string{"thinking", "context_management"},
			left: LeftOut{"thinking", "context_management clear_thinking"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseMessagesRequest([]byte(tt.body), false)
			if err != nil {
				t.Fatal(err)
			}
			r.Version, r.Beta = "2023-06-01", "interleaved-thinking-2025-05-14"
			out, left, err := r.Without(tt.drop)
			if err != nil {
				t.Fatal(err)
			}
			checkWithout(t, tt, r.Body, out.Body, left)
			if out.Version != r.Version || out.Beta != r.Beta || out.MaxTokens != r.MaxTokens || out.ModelAt.End == 0 {
				t.Errorf("version %q, beta %q, max tokens %d, model at %+v", out.Version, out.Beta, out.MaxTokens, out.ModelAt)
			}
			again, err := ParseMessagesRequest(out.Body, false)
			if err != nil {
				t.Fatalf("the body does not parse again: %v\n%s", err, out.Body)
			}
			checkDropped(t, r.Needs(), again.Needs(), tt.drop)
		})
	}
}

// checkWithout checks the body a Without made of body: the members named
// gone are, the edited ones hold what they should, every other member is
// as sent, and the warning names what went.
func checkWithout(t *testing.T, tt withoutCase, body, out []byte, left LeftOut) {
	t.Helper()
	var before, after map[string]json.RawMessage
	if err := json.Unmarshal(body, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{}
	for name, v := range before {
		switch edited, ok := tt.edited[name]; {
		case slices.Contains(tt.gone, name):
		case ok:
			want[name] = edited
		default:
			want[name] = string(v)
		}
	}
	got := map[string]string{}
	for name, v := range after {
		got[name] = string(v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tt.left, left); diff != "" {
		t.Errorf("left out (-want +got):\n%s", diff)
	}
	if w := left.Warning(); !strings.Contains(w, tt.left[0]) {
		t.Errorf("warning %q", w)
	}
}

// checkDropped checks the Needs of a request served without drop: it
// uses what it used but drop.
func checkDropped(t *testing.T, before, after Needs, drop []Capability) {
	t.Helper()
	var want []Capability
	for _, c := range before.Uses {
		if !slices.Contains(drop, c) {
			want = append(want, c)
		}
	}
	if diff := cmp.Diff(want, after.Uses); diff != "" {
		t.Errorf("uses after Without(%v) (-want +got):\n%s", drop, diff)
	}
}

// A request that uses nothing drop names is served as it is, the same
// request; what cannot be left out is never.
func TestWithoutNothingToDrop(t *testing.T) {
	t.Parallel()
	chat, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none","tools":[],"response_format":{"type":"json_object"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if out, left, err := chat.Without(droppable); out != chat || left != nil || err != nil {
		t.Errorf("chat: %p %v %v, want %p", out, left, err, chat)
	}
	msgs, err := ParseMessagesRequest([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tool_choice":{"type":"none"},`+
		`"context_management":{"edits":[{"type":"clear_thinking_20251015"}]}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if out, left, err := msgs.Without(droppable); out != msgs || left != nil || err != nil {
		t.Errorf("messages: %p %v %v, want %p", out, left, err, msgs)
	}
	for _, c := range []Capability{CapImage, CapAudio, CapFile, "video"} {
		if _, _, err := chat.Without([]Capability{c}); err == nil {
			t.Errorf("chat without %s: no error", c)
		}
		if _, _, err := msgs.Without([]Capability{CapTools, c}); err == nil {
			t.Errorf("messages without %s: no error", c)
		}
	}
}

func TestCapabilityPhrase(t *testing.T) {
	t.Parallel()
	var got []string
	for _, c := range capabilities {
		got = append(got, c.Phrase())
	}
	want := []string{"image input", "audio input", "file input", "tools", "JSON schema output", "reasoning"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("phrases (-want +got):\n%s", diff)
	}
}

// Whatever a client sends that parses, Needs reads it, and Without of all
// that can go makes a request that parses again and uses nothing of it,
// but what it used besides.
func FuzzNeeds(f *testing.F) {
	for _, body := range []string{agentChat, claudeCode, claudeCodeAdaptive,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image\u005furl"}]}],"output_config":{"Format":{"type":"json_schema"},"format":null}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[1],"Tools":[],"tools":{},"reasoning":{"EFFORT":"none"},"context_management":{"edits":[{"type":"clear_thinking_1"}],"Edits":[]}}`} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if r, err := ParseChatRequest(body); err == nil {
			out, _, err := r.Without(droppable)
			if err != nil {
				t.Fatalf("chat Without of %s: %v", body, err)
			}
			again, err := ParseChatRequest(out.body())
			if err != nil {
				t.Fatalf("chat Without of %s made %s: %v", body, out.body(), err)
			}
			checkDropped(t, r.Needs(), again.Needs(), droppable)
			checkInputs(t, r.Members["messages"], false)
		}
		if r, err := ParseMessagesRequest(body, true); err == nil {
			out, _, err := r.Without(droppable)
			if err != nil {
				t.Fatalf("messages Without of %s: %v", body, err)
			}
			again, err := ParseMessagesRequest(out.Body, true)
			if err != nil {
				t.Fatalf("messages Without of %s made %s: %v", body, out.Body, err)
			}
			checkDropped(t, r.Needs(), again.Needs(), droppable)
			checkInputs(t, r.Members["messages"], true)
		}
	})
}

// checkInputs checks what chatInputs (turnInputs when messages) finds in
// msgs against referenceInputs, where both read the same: encoding/json
// and the providers read ambiguous keys differently.
func checkInputs(t *testing.T, msgs json.RawMessage, messages bool) {
	t.Helper()
	if jsonscan.AmbiguousKeys(msgs) {
		return
	}
	got := chatInputs(msgs)
	if messages {
		got = turnInputs(msgs)
	}
	if want := referenceInputs(msgs, messages); got != want {
		t.Errorf("inputs of %s (messages %v): %b, want %b", msgs, messages, got, want)
	}
}

// referenceInputs is chatInputs (turnInputs when messages) as
// encoding/json reads the parts into structs, without the search that
// skips most requests.
func referenceInputs(raw json.RawMessage, messages bool) CapSet {
	var uses CapSet
	var blocks func(content json.RawMessage, nested bool)
	blocks = func(content json.RawMessage, nested bool) {
		var ps []json.RawMessage
		json.Unmarshal(content, &ps) //nolint:errcheck // content of another shape has no parts
		for _, raw := range ps {
			var p struct {
				Type    string
				Source  json.RawMessage
				Content json.RawMessage
			}
			json.Unmarshal(raw, &p) //nolint:errcheck // what is of another type is left out, the rest read
			var source struct{ Type string }
			json.Unmarshal(p.Source, &source) //nolint:errcheck
			switch {
			case !messages && p.Type == "image_url", messages && p.Type == "image":
				uses.Add(CapImage)
			case !messages && p.Type == "input_audio":
				uses.Add(CapAudio)
			case !messages && p.Type == "file", messages && p.Type == "document" && source.Type != "text":
				uses.Add(CapFile)
			case messages && !nested && p.Type == "tool_result":
				blocks(p.Content, true)
			}
		}
	}
	var turns []json.RawMessage
	json.Unmarshal(raw, &turns) //nolint:errcheck
	for _, turn := range turns {
		var tn struct{ Content json.RawMessage }
		json.Unmarshal(turn, &tn) //nolint:errcheck
		blocks(tn.Content, false)
	}
	return uses
}

// claudeCodeSession is a Claude Code request some turns into a session,
// about 20 KB: its system prompt, a dozen tools, and turns of tool calls
// and results.
func claudeCodeSession() []byte {
	var tools, turns []string
	for i := range 12 {
		tools = append(tools, fmt.Sprintf(`{"name":"Tool%d","description":"%s","input_schema":{"type":"object","properties":{"path":{"type":"string","description":"An absolute path."},"limit":{"type":"number"}},"required":["path"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}}`,
			i, strings.Repeat("Does one thing to a file of the project. ", 12)))
	}
	turns = append(turns, `{"role":"user","content":[{"type":"text","text":"<system-reminder>The todo list is empty.</system-reminder>"},{"type":"text","text":"Fix the failing test."}]}`)
	for i := range 12 {
		turns = append(turns,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"Look at file %d.","signature":"EqQBCkYIBxgCKkBsig=="},{"type":"tool_use","id":"toolu_%02d","name":"Tool1","input":{"path":"/src/file%d.go"}}]}`, i, i, i),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%02d","content":"%s"}]}`, i, strings.Repeat(`     1\tpackage main\n     2\tfunc main() { println(\"hi\") }\n`, 8)))
	}
	return []byte(`{"model":"claude-sonnet-4-5-20250929","messages":[` + strings.Join(turns, ",") + `],"temperature":1,` +
		`"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"` +
		strings.Repeat("You are an interactive CLI tool that helps users with software engineering tasks. ", 20) + `"}],` +
		`"tools":[` + strings.Join(tools, ",") + `],"metadata":{"user_id":"user_2f1c"},"max_tokens":32000,"thinking":{"budget_tokens":31999,"type":"enabled"},"stream":true}`)
}

// Needs runs on every request: most have no image or file, which a
// search of their bytes tells; those that have are walked.
func BenchmarkNeeds(b *testing.B) {
	session := string(claudeCodeSession())
	image := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + strings.Repeat("iVBORw0KGgo", 24<<10) + `"}}`
	withImage := strings.Replace(session, `{"type":"text","text":"Fix the failing test."}`, image, 1)
	screenshot := strings.Replace(session, `"content":"     1`, `"content":[`+image+`],"x":"     1`, 1)
	tests := []struct {
		name  string
		body  string
		chat  bool
		count int // of capabilities used
	}{
		{fmt.Sprintf("claude-code-%dKB", len(session)>>10), session, false, 2},
		{fmt.Sprintf("claude-code-image-%dKB", len(withImage)>>10), withImage, false, 3},
		{fmt.Sprintf("claude-code-screenshot-%dKB", len(screenshot)>>10), screenshot, false, 3},
		{fmt.Sprintf("agent-chat-%dKB", len(agentChat)>>10), agentChat, true, 4},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			var needs func() Needs
			if tt.chat {
				r, err := ParseChatRequest([]byte(tt.body))
				if err != nil {
					b.Fatal(err)
				}
				needs = r.Needs
			} else {
				r, err := ParseMessagesRequest([]byte(tt.body), false)
				if err != nil {
					b.Fatal(err)
				}
				needs = r.Needs
			}
			b.ReportAllocs()
			for b.Loop() {
				if n := needs(); len(n.Uses) != tt.count {
					b.Fatal(n)
				}
			}
		})
	}
}
