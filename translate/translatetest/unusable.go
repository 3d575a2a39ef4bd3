package translatetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"modelgate/translate"
)

// UnusableBodies are success bodies no buffered translator can use, for
// any endpoint: empty, not JSON, JSON that is no object, cut-off JSON.
// Translators add the shapes of their own answer that break it.
var UnusableBodies = []string{
	"",
	" \r\n",
	"not json",
	"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
	"[]",
	"[{}]",
	"null",
	`"x"`,
	"42",
	"true",
	"{",
	`{"id":`,
	`{"id":"x",`,
	`{"id":"x"}}`,
	"\x00\xff",
}

// CheckUnusable plays each of UnusableBodies and extra through a fresh
// translator from newTr as a buffered success answer with the given
// content type (RequestBody, ResponseHeaders(200, contentType), then
// ResponseBody once at the end of the stream), and fails the test unless
// ResponseBody returns an error wrapping translate.ErrUpstream, without
// output and without a panic.
func CheckUnusable(t *testing.T, newTr func() translate.Translator, contentType string, extra ...string) {
	t.Helper()
	for _, body := range append(append([]string(nil), UnusableBodies...), extra...) {
		out, err := playBuffered(t, newTr, contentType, body)
		if !errors.Is(err, translate.ErrUpstream) || out != nil {
			t.Errorf("body %.80q: ResponseBody = %.80q, %v; want an error wrapping translate.ErrUpstream", body, out, err)
		}
	}
}

// PlayBuffered plays body through a fresh translator as a buffered 200
// answer with contentType and returns what ResponseBody returned; a panic
// fails the test.
func PlayBuffered(t *testing.T, newTr func() translate.Translator, contentType, body string) ([]byte, error) {
	t.Helper()
	return playBuffered(t, newTr, contentType, body)
}

func playBuffered(t *testing.T, newTr func() translate.Translator, contentType, body string) (out []byte, err error) {
	t.Helper()
	tr := newTr()
	if _, err := tr.RequestBody(); err != nil {
		t.Fatalf("RequestBody: %v", err)
	}
	if head := tr.ResponseHeaders(200, contentType); head.Stream {
		t.Fatalf("ResponseHeaders(200, %q) = %+v, want a buffered head", contentType, head)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("body %.80q: ResponseBody panicked: %v", body, p)
			out, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	return tr.ResponseBody([]byte(body), true)
}

// goNames are what encoding/json and fmt write of Go values and types;
// none belongs in a message to a client.
var goNames = []string{"Go struct", "Go value", "json: ", "map[string]", "[]interface", "interface {}", "struct {",
	"json.RawMessage", "[]string", "*string", "unmarshal", "%!"}

// CheckClientMessage fails the test unless err is a client error (an
// *openai.RequestError) whose message is not empty, at most maxLen bytes
// and free of Go type names and encoding/json's wording.
func CheckClientMessage(t testing.TB, err error, maxLen int) {
	t.Helper()
	ce, ok := clientError(err)
	if !ok {
		t.Errorf("error %v is not a client error", err)
		return
	}
	msg := ce["message"]
	switch {
	case msg == "":
		t.Errorf("client error %v has no message", ce)
	case len(msg) > maxLen:
		t.Errorf("client error message is %d bytes, want at most %d: %.200q…", len(msg), maxLen, msg)
	case len(ce["param"]) > maxLen:
		t.Errorf("client error param is %d bytes, want at most %d", len(ce["param"]), maxLen)
	}
	for _, name := range goNames {
		if strings.Contains(msg, name) {
			t.Errorf("client error message %.300q contains %q", msg, name)
		}
	}
}

// CheckErrorBody fails the test unless out is an OpenAI error response
// with a type, whose message is not empty and at most maxMessage bytes, and whose
// param and code are null or non-empty strings (never ""). It returns the
// message and code ("" for null).
func CheckErrorBody(t testing.TB, out []byte, maxMessage int) (message, code string) {
	t.Helper()
	var e struct {
		Error *struct {
			Message *string         `json:"message"`
			Type    *string         `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &e); err != nil || e.Error == nil || e.Error.Message == nil || e.Error.Type == nil || *e.Error.Type == "" {
		t.Errorf("%.300s is not an OpenAI error response", out)
		return "", ""
	}
	if m := *e.Error.Message; m == "" || len(m) > maxMessage {
		t.Errorf("error message %.200q… (%d bytes) is empty or over %d bytes", m, len(m), maxMessage)
	}
	for name, v := range map[string]json.RawMessage{"param": e.Error.Param, "code": e.Error.Code} {
		var s string
		if string(v) != "null" && (json.Unmarshal(v, &s) != nil || s == "") {
			t.Errorf("error %s is %s, want null or a non-empty string", name, v)
		}
	}
	json.Unmarshal(e.Error.Code, &code) //nolint:errcheck // null is ""
	return *e.Error.Message, code
}
