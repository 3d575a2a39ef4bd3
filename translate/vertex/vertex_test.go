package vertex

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

func newChat(t *testing.T, body, model string) translate.Translator {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return NewChat(translate.Target{Provider: "vertex", Model: model, Project: "my-proj", Region: "us-east5", APIKey: "ya29.token"}, req)
}

func TestPathsAndAuth(t *testing.T) {
	tests := []struct{ model, body, path string }{
		{"gemini-2.5-flash", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			"/v1/projects/my-proj/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent"},
		{"gemini-2.5-flash", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`,
			"/v1/projects/my-proj/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{"claude-sonnet-4@20250514", `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
			"/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict"},
		{"claude-sonnet-4@20250514", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`,
			"/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict"},
	}
	for _, tt := range tests {
		up, err := newChat(t, tt.body, tt.model).RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		if up.Path != tt.path {
			t.Errorf("path = %s\nwant   %s", up.Path, tt.path)
		}
		want := []translate.Header{{Name: "content-type", Value: "application/json"}, {Name: "authorization", Value: "Bearer ya29.token"}}
		if diff := cmp.Diff(want, up.Headers); diff != "" {
			t.Errorf("headers (-want +got):\n%s", diff)
		}
	}
	up, _ := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "claude-x").RequestBody()
	var body map[string]any
	json.Unmarshal(up.Body, &body)
	if body["anthropic_version"] != AnthropicVersion || body["model"] != nil || body["max_tokens"] == nil {
		t.Errorf("anthropic body = %v", body)
	}
}

func TestRecordedVertexResponses(t *testing.T) {
	dir := "../../testdata/fixtures/gemini/vertex/"
	tr := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "gemini-2.0-flash")
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody(mustRead(t, dir+"test_google_model_vertex_provider.bodies/00.response.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	st := newChat(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`, "gemini-3-flash-preview")
	st.ResponseHeaders(200, "text/event-stream")
	a, _ := st.ResponseBody(mustRead(t, dir+"test_google_vertex_service_tier_flex_stream.bodies/00.response.sse"), false)
	b, _ := st.ResponseBody(nil, true)
	stream := append(a, b...)
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", stream)
	if !bytes.HasSuffix(stream, []byte("data: [DONE]\n\n")) {
		t.Errorf("stream = %s", stream)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Claude on Vertex is sent Anthropic's max_tokens, and says so; Gemini is
// sent no bound the client did not set.
func TestMaxOutputTokens(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	for model, want := range map[string]int64{"claude-sonnet-4@20250514": 4096, "gemini-2.5-flash": 0} {
		tr := newChat(t, body, model)
		up, err := tr.RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		if got := translate.MaxOutputTokens(tr); got != want || DefaultMaxOutput(model) != want {
			t.Errorf("%s: MaxOutputTokens %d, DefaultMaxOutput %d, want %d", model, got, DefaultMaxOutput(model), want)
		}
		if want > 0 && !bytes.Contains(up.Body, []byte(`"max_tokens":4096`)) {
			t.Errorf("%s: the body does not carry the bound: %s", model, up.Body)
		}
	}
}
