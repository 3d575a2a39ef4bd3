package bedrock

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

// count_tokens to Claude on Bedrock: CountTokens for the foundation id
// with the InvokeModel body base64 in input.invokeModel.body; its count
// comes back as the Messages API's, its errors in the Messages API's
// shape; other models are not counted by Bedrock.
func TestCountTokens(t *testing.T) {
	r, err := api.ParseMessagesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if NewCountTokens(translate.Target{Model: "us.amazon.nova-micro-v1:0"}, r) != nil {
		t.Error("Nova counted by Bedrock")
	}
	c := NewCountTokens(translate.Target{Model: "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", APIKey: "k"}, r)
	up, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Input struct {
			InvokeModel struct{ Body string } `json:"invokeModel"`
		} `json:"input"`
	}
	json.Unmarshal(up.Body, &body)
	invoke, _ := base64.StdEncoding.DecodeString(body.Input.InvokeModel.Body)
	if up.Path != "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens" ||
		!strings.Contains(string(invoke), `"anthropic_version":"bedrock-2023-05-31"`) || !strings.Contains(string(invoke), `"max_tokens":1`) ||
		strings.Contains(string(invoke), `"model"`) {
		t.Errorf("upstream %s %s (invoke body %s)", up.Path, up.Body, invoke)
	}
	c.ResponseHeaders(200, "application/json")
	if out, err := c.ResponseBody([]byte(`{"inputTokens":42}`), true); err != nil || string(out) != `{"input_tokens":42}` {
		t.Errorf("count: %s %v", out, err)
	}
	if u := c.Usage(); u.PromptTokens != 42 || u.TotalTokens != 42 { // charged to token limits
		t.Errorf("usage of a count of 42: %+v", u)
	}
	c = NewCountTokens(translate.Target{Model: "anthropic.claude-x"}, r)
	c.RequestBody() //nolint:errcheck // a valid request
	c.ResponseHeaders(400, "application/json")
	out, _ := c.ResponseBody([]byte(`{"message":"The provided model doesn't support counting tokens."}`), true)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if json.Unmarshal(out, &e) != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" ||
		e.Error.Message != "The provided model doesn't support counting tokens." {
		t.Errorf("error: %s", out)
	}
}
