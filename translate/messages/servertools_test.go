package messages

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
)

// The blocks of Anthropic's server tools, in the shapes Anthropic's API
// reference gives them (no recording exists): what a client sends back of
// an answer in which tools ran on Anthropic's side.
var serverBlocks = map[string]string{
	"server_tool_use":        `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"claude shannon birth date"}}`,
	"web_search_tool_result": `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://en.wikipedia.org/wiki/Claude_Shannon","title":"Claude Shannon - Wikipedia","encrypted_content":"EqgfCioIARgBIiQ3YTAw","page_age":"April 30, 2025"}]}`,
	"web_fetch_tool_result": `{"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"web_fetch_result","url":"https://example.com/a","retrieved_at":"2025-08-25T10:30:02Z",` +
		`"content":{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Page text."},"title":"A"}}}`,
	"code_execution_tool_result":             `{"type":"code_execution_tool_result","tool_use_id":"srvtoolu_3","content":{"type":"code_execution_result","stdout":"17.0\n","stderr":"","return_code":0,"content":[]}}`,
	"bash_code_execution_tool_result":        `{"type":"bash_code_execution_tool_result","tool_use_id":"srvtoolu_4","content":{"type":"bash_code_execution_result","stdout":"ok","stderr":"","return_code":0,"content":[]}}`,
	"text_editor_code_execution_tool_result": `{"type":"text_editor_code_execution_tool_result","tool_use_id":"srvtoolu_5","content":{"type":"text_editor_code_execution_view_result","file_type":"text","content":"x = 1","num_lines":1,"start_line":1,"total_lines":1}}`,
	"tool_search_tool_result":                `{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_6","content":{"type":"tool_search_tool_search_result","tool_references":[{"type":"tool_reference","tool_name":"get_weather"}]}}`,
	"advisor_tool_result":                    `{"type":"advisor_tool_result","tool_use_id":"srvtoolu_7","content":{"type":"advisor_result","text":"Check the units."}}`,
	"mcp_tool_use":                           `{"type":"mcp_tool_use","id":"mcptoolu_1","name":"get_issue","server_name":"github","input":{"n":1}}`,
	"mcp_tool_result":                        `{"type":"mcp_tool_result","tool_use_id":"mcptoolu_1","is_error":false,"content":[{"type":"text","text":"Issue 1: crash"}]}`,
	"container_upload":                       `{"type":"container_upload","file_id":"file_011CNha8iCJcU1wXNR6q4V8w"}`,
}

const historyWarning = "server tool blocks were left out of the conversation: "

// Each server tool block of a turn is left out and named in the warning:
// the tools ran on Anthropic's side, their results mean nothing to
// another provider, as the tools themselves are left out. The turn's text
// stays.
func TestToChatLeavesOutServerToolBlocks(t *testing.T) {
	for typ, b := range serverBlocks {
		t.Run(typ, func(t *testing.T) {
			turn := `{"role":"assistant","content":[{"type":"text","text":"Let me look."},` + b + `,{"type":"text","text":" Done."}]}`
			want := []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Hi"}}},
				{"role": "assistant", "content": "Let me look. Done."}}
			if typ == "container_upload" { // a user's upload of a file for code execution
				turn = `{"role":"user","content":[` + b + `,{"type":"text","text":"Run it."}]}`
				want[1] = map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Run it."}}}
			}
			msgs, warning := toChat(t, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"},`+turn+`]}`)
			if diff := cmp.Diff(want, msgs); diff != "" {
				t.Errorf("chat messages (-want +got):\n%s", diff)
			}
			if warning != historyWarning+typ {
				t.Errorf("warning %q, want %q", warning, historyWarning+typ)
			}
		})
	}
}

// toChat is ToChat's chat messages and warning of a Messages request.
func toChat(t *testing.T, body string) ([]map[string]any, string) {
	t.Helper()
	r, err := api.ParseMessagesRequest([]byte(body), false)
	if err != nil {
		t.Fatal(err)
	}
	req, warning, err := ToChat(r)
	if err != nil {
		t.Fatalf("ToChat: %v", err)
	}
	var msgs []map[string]any
	if err := json.Unmarshal(req.Members["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs, warning
}

// A conversation that searched the web on Claude continues on another
// provider: the search's blocks and the turn made of nothing else are
// left out (a chat assistant message needs content or tool calls), the
// text, its citations dropped, stays; the server tools and their history
// are named in one warning.
func TestServerToolHistoryOnProviders(t *testing.T) {
	body := `{"model":"m","max_tokens":100,"tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"code_execution_20250825","name":"code_execution"}],"messages":[` +
		`{"role":"user","content":"When was Claude Shannon born?"},` +
		`{"role":"assistant","content":[{"type":"text","text":"I'll search. "},` + serverBlocks["server_tool_use"] + `,` + serverBlocks["web_search_tool_result"] + `,` +
		`{"type":"text","text":"He was born on April 30, 1916.","citations":[{"type":"web_search_result_location","url":"https://en.wikipedia.org/wiki/Claude_Shannon",` +
		`"title":"Claude Shannon - Wikipedia","encrypted_index":"Eo8BCioIAhgBIiQy","cited_text":"Claude Elwood Shannon (April 30, 1916 – February 24, 2001)"}]}]},` +
		`{"role":"user","content":"Average of 10 and 24?"},` +
		`{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_3","name":"code_execution","input":{"code":"print((10+24)/2)"}},` + serverBlocks["code_execution_tool_result"] + `]},` +
		`{"role":"user","content":"Thanks. And his birthplace?"}]}`
	msgs, _ := toChat(t, body)
	text := func(s string) []any { return []any{map[string]any{"type": "text", "text": s}} }
	want := []map[string]any{{"role": "user", "content": text("When was Claude Shannon born?")},
		{"role": "assistant", "content": "I'll search. He was born on April 30, 1916."},
		{"role": "user", "content": text("Average of 10 and 24?")}, {"role": "user", "content": text("Thanks. And his birthplace?")}}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("chat messages (-want +got):\n%s", diff)
	}
	wantWarning := "tools the provider cannot run were left out: web_search_20250305, code_execution_20250825; " +
		historyWarning + "server_tool_use, web_search_tool_result, code_execution_tool_result"
	for _, p := range []struct {
		name string
		chat func(translate.Target, *api.ChatRequest) translate.Translator
	}{{"openai", openai.NewChat}, {"gemini", gemini.NewChat}, {"bedrock", bedrock.NewChat}, {"cohere", cohere.NewChat}} {
		t.Run(p.name, func(t *testing.T) {
			req, err := api.ParseMessagesRequest([]byte(body), false)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := NewBridge(p.chat, translate.Target{Provider: p.name, Model: "m"}, req)
			if err != nil {
				t.Fatalf("NewBridge: %v", err)
			}
			up, err := tr.RequestBody()
			if err != nil {
				t.Fatalf("RequestBody: %v", err)
			}
			if !strings.Contains(string(up.Body), "He was born on April 30, 1916.") || strings.Contains(string(up.Body), "srvtoolu") {
				t.Errorf("upstream body %s", up.Body)
			}
			if h := tr.ResponseHeaders(200, "application/json"); h.Warning != wantWarning {
				t.Errorf("warning %q, want %q", h.Warning, wantWarning)
			}
		})
	}
}
