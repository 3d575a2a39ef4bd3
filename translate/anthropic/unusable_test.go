package anthropic_test

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// BadMessages are shapes that break an Anthropic Message.
var BadMessages = []string{`{}`, `{"type":"message"}`, `{"id":5}`, `{"id":"msg_1"}`, `{"id":"msg_1","content":null}`,
	`{"id":"msg_1","content":"x"}`, `{"id":"msg_1","content":{}}`, `{"id":"msg_1","content":[null]}`, `{"id":"msg_1","content":[1]}`,
	`{"id":"msg_1","content":[{"type":"text","text":5}]}`, `{"id":"msg_1","content":[],"usage":"x"}`}

func TestUnusableSuccessBodies(t *testing.T) {
	for _, body := range []string{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`} {
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return anthropic.NewChat(translate.Target{Provider: "anthropic", Model: "claude"}, req)
		}, "application/json", BadMessages...)
	}
}

// Error bodies become OpenAI errors with a bounded, non-empty message and
// a null code when Anthropic names no error type.
func TestErrorBodiesBounded(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 100000)
	for _, tt := range []struct {
		status   int
		body     string
		wantCode string
	}{
		{400, `{"type":"error","error":{"message":"no type"}}`, ""},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"` + long + `"}}`, "invalid_request_error"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":""}}`, ""},
		{500, "<html><head><title>Oops</title></head>" + long + "</html>", ""},
		{502, long, ""},
	} {
		tr := anthropic.NewChat(translate.Target{Provider: "anthropic", Model: "claude"}, req)
		tr.ResponseHeaders(tt.status, "application/json")
		out, err := tr.ResponseBody([]byte(tt.body), true)
		if err != nil {
			t.Fatal(err)
		}
		if _, code := translatetest.CheckErrorBody(t, out, 4100); code != tt.wantCode {
			t.Errorf("%.60s: code %q, want %q", tt.body, code, tt.wantCode)
		}
	}
}
