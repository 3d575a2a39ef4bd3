package responses

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api/spec"
	"modelgate/translate/openai"
)

// /v1/responses on a Mistral thinking model: its typed-parts answer (as
// Mistral's reasoning documentation shows it) becomes a reasoning item
// and the message, not a 502.
func TestMistralThinkingBridge(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"m","input":"2+2?"}`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := ToChat(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTranslator(openai.NewCompatibleChat(openai.CompatibleProviders()["mistral"])(translate.Target{Model: "magistral-medium-latest"}, req), r, nil, "resp_1", 1700000000)
	if _, err := tr.RequestBody(); err != nil {
		t.Fatal(err)
	}
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody([]byte(`{"id":"cmpl-1","object":"chat.completion","model":"magistral-medium-latest","created":1,"choices":[{"index":0,"message":{"role":"assistant",`+
		`"content":[{"type":"thinking","thinking":[{"type":"text","text":"2 and 2 make 4."}]},{"type":"text","text":"The answer is 4."}]},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	if !strings.Contains(string(out), `"text":"The answer is 4."`) || !strings.Contains(string(out), `"type":"reasoning"`) || !strings.Contains(string(out), "2 and 2 make 4.") {
		t.Errorf("response %s", out)
	}
}
