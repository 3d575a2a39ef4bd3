package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A Messages request keeps what the client runs and loses what the
// provider would run or bill beyond the standard price, unless the model
// enables it (web search only); the rest of the body is kept as sent.
func TestMessagesPermitted(t *testing.T) {
	const body = `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}],
  "tools":[{"name":"Bash","input_schema":{"type":"object"}},{"type":"custom","name":"c","input_schema":{"type":"object"}},
    {"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},
    {"type":"tool_search_tool_regex_20251119","name":"tool_search"},
    {"type":"web_search_20250305","name":"web_search","max_uses":3},{"type":"web_fetch_20250910","name":"web_fetch"},
    {"type":"code_execution_20250825","name":"code_execution"},{"type":"mcp_toolset","mcp_server_name":"x"},
    {"type":"advisor_20260301","name":"advisor"}],
  "tool_choice":{"type":"tool","name":"web_fetch"},
  "mcp_servers":[{"type":"url","url":"https://evil.example/mcp","name":"x"}],"container":"cntr_1",
  "service_tier":"auto","speed":"fast","inference_geo":"us","metadata":{"user_id":"u"}}`
	for _, webSearch := range []bool{false, true} {
		req, err := ParseMessagesRequest([]byte(body), false)
		if err != nil {
			t.Fatal(err)
		}
		req.Version, req.Beta = "2023-06-01", "claude-code-20250219, context-1m-2025-08-07,interleaved-thinking-2025-05-14,mcp-client-2025-11-20"
		out, left, err := req.Permitted(webSearch)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Tools      []struct{ Type, Name string }
			ToolChoice json.RawMessage `json:"tool_choice"`
			Members    map[string]json.RawMessage
		}
		json.Unmarshal(out.Body, &got) //nolint:errcheck // checked below
		var names []string
		for _, tool := range got.Tools {
			names = append(names, tool.Name)
		}
		want := []string{"Bash", "c", "bash", "str_replace_based_edit_tool", "tool_search"}
		wantLeft := "tool web_fetch_20250910, tool code_execution_20250825, tool mcp_toolset, tool advisor_20260301, " +
			`mcp_servers, container "cntr_1", speed "fast", inference_geo "us", beta context-1m-2025-08-07, beta mcp-client-2025-11-20`
		if webSearch {
			want = append(want[:5:5], "web_search")
		} else {
			wantLeft = "tool web_search_20250305, " + wantLeft
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("web search %v: tools (-want +got):\n%s", webSearch, diff)
		}
		if got := strings.Join(left, ", "); got != wantLeft {
			t.Errorf("web search %v: left out %q, want %q", webSearch, got, wantLeft)
		}
		for _, gone := range []string{"mcp_servers", "container", "speed", "inference_geo", "tool_choice"} {
			if _, ok := out.Members[gone]; ok {
				t.Errorf("web search %v: %s kept", webSearch, gone)
			}
		}
		if string(out.Members["service_tier"]) != `"auto"` || string(out.Members["metadata"]) != `{"user_id":"u"}` ||
			string(out.Members["messages"]) != `[{"role":"user","content":"hi"}]` || out.Model != "m" || out.MaxTokens != 100 {
			t.Errorf("web search %v: what is allowed was not kept as sent: %s", webSearch, out.Body)
		}
		if out.Beta != "claude-code-20250219,interleaved-thinking-2025-05-14" || out.Version != "2023-06-01" {
			t.Errorf("web search %v: beta %q, version %q", webSearch, out.Beta, out.Version)
		}
		if !json.Valid(out.Body) || out.ModelAt.End == 0 {
			t.Errorf("web search %v: body %s (model at %+v)", webSearch, out.Body, out.ModelAt)
		}
	}
}

// A member named twice, or with escapes in its name, is left out as a
// provider would read it: both times, whatever the spelling.
func TestPermittedReadsNamesAsTheProviderDoes(t *testing.T) {
	body := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"mcp\u005fservers":[{"url":"https://evil.example"}],` +
		`"service_tier":"standard_only","service_tier":"priority"}`
	req, err := ParseMessagesRequest([]byte(body), false)
	if err != nil {
		t.Fatal(err)
	}
	out, left, err := req.Permitted(false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out.Body), "evil.example") || strings.Contains(string(out.Body), "service_tier") || len(left) != 2 {
		t.Errorf("body %s, left out %q", out.Body, left)
	}
}

// A request with nothing to lose is the request itself, not a copy.
func TestPermittedKeepsAPlainRequest(t *testing.T) {
	req, err := ParseMessagesRequest([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"service_tier":"standard_only","speed":"standard"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if out, left, err := req.Permitted(false); out != req || left != nil || err != nil {
		t.Errorf("Permitted = %p, %q, %v; want the request, nothing left out", out, left, err)
	}
	chat, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"flex","web_search_options":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if out, left, err := chat.Permitted(true); out != chat || left != nil || err != nil {
		t.Errorf("chat Permitted = %p, %q, %v; want the request, nothing left out", out, left, err)
	}
}

// A chat request loses web_search_options unless the model may search,
// and a service tier that costs more than the default.
func TestChatPermitted(t *testing.T) {
	for _, tt := range []struct {
		body, left string
		webSearch  bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{"search_context_size":"high"}}`, "web_search_options", false},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, "", true},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"priority"}`, `service_tier "priority"`, true},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"scale"}`, `service_tier "scale"`, true},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"default"}`, "", false},
	} {
		req, err := ParseChatRequest([]byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		out, left, err := req.Permitted(tt.webSearch)
		if err != nil || strings.Join(left, ", ") != tt.left {
			t.Errorf("%s: left out %q (%v), want %q", tt.body, left, err, tt.left)
			continue
		}
		for _, l := range left {
			name, _, _ := strings.Cut(l, " ")
			if _, ok := out.Members[name]; ok || strings.Contains(string(out.Body), name) {
				t.Errorf("%s: %s kept in %s", tt.body, name, out.Body)
			}
		}
		if out.ModelAt.End == 0 && tt.left != "" {
			t.Errorf("%s: the permitted request lost its model's place: %s", tt.body, out.Body)
		}
	}
}

func TestLeftOutWarning(t *testing.T) {
	if w := (LeftOut{"tool web_fetch_20250910", "beta context-1m-2025-08-07"}).Warning(); w != "not enabled for this model, left out: tool web_fetch_20250910, beta context-1m-2025-08-07" {
		t.Errorf("Warning = %q", w)
	}
	if w := LeftOut(nil).Warning(); w != "" {
		t.Errorf("Warning of nothing = %q", w)
	}
	if w := JoinWarnings("a", "b") + "|" + JoinWarnings("", "b") + "|" + JoinWarnings("a", ""); w != "a; b|b|a" {
		t.Errorf("JoinWarnings = %q", w)
	}
}
