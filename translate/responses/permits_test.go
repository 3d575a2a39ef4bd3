package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// A Responses request keeps the tools the client runs and loses those
// OpenAI runs itself, but web search where the model may search; a
// tool_choice that forces a lost tool goes with it, and so does a
// premium service tier.
func TestResponsesPermitted(t *testing.T) {
	const body = `{"model":"m","input":"hi","service_tier":"priority","tool_choice":{"type":"file_search"},"tools":[
		{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"custom","name":"apply_patch"},
		{"type":"local_shell"},{"type":"web_search"},{"type":"file_search","vector_store_ids":["vs_operator"]},
		{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"},
		{"type":"mcp","server_label":"x","server_url":"https://evil.example/mcp"}]}`
	for _, webSearch := range []bool{false, true} {
		req, err := ParseRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		out, left, err := req.Permitted(webSearch)
		if err != nil {
			t.Fatal(err)
		}
		var tools []struct{ Type string }
		json.Unmarshal(out.Members["tools"], &tools) //nolint:errcheck // checked below
		var types []string
		for _, tool := range tools {
			types = append(types, tool.Type)
		}
		want, wantLeft := "function custom local_shell", `tool file_search, tool code_interpreter, tool image_generation, tool mcp, service_tier "priority"`
		if webSearch {
			want = "function custom local_shell web_search"
		} else {
			wantLeft = "tool web_search, " + wantLeft
		}
		if got := strings.Join(types, " "); got != want {
			t.Errorf("web search %v: tools %q, want %q", webSearch, got, want)
		}
		if got := strings.Join(left, ", "); got != wantLeft {
			t.Errorf("web search %v: left out %q, want %q", webSearch, got, wantLeft)
		}
		if _, ok := out.Members["service_tier"]; ok {
			t.Errorf("web search %v: service_tier kept", webSearch)
		}
		if _, ok := out.Members["tool_choice"]; ok {
			t.Errorf("web search %v: a tool_choice forcing file_search kept", webSearch)
		}
		if _, ok := req.Members["service_tier"]; !ok {
			t.Error("the client's request was changed in place")
		}
	}
}
