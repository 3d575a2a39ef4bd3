package guards_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/cmd/mockprovider/guards"
)

// post sends body to the emulators, mounted under /guard, at path with
// header, and returns the status and the answer, which must be JSON.
func post(t *testing.T, path string, header http.Header, body string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/guard"+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	guards.Handler("/guard").ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("POST %s: status %d, %q answer %q, want JSON", path, rec.Code, ct, rec.Body)
	}
	return rec.Code, rec.Body.Bytes()
}

// decode is answer decoded into a fresh T.
func decode[T any](t *testing.T, answer []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(answer, &v); err != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
	return v
}

// checkStatus fails unless status is want; a 2xx answer is then decoded
// into got, any other must be an error (an object with an "error" or a
// "message" member).
func checkStatus[T any](t *testing.T, status, want int, answer []byte, got *T) {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d; answer %s", status, want, answer)
	}
	if status/100 == 2 {
		*got = decode[T](t, answer)
		return
	}
	if e := decode[map[string]any](t, answer); e["error"] == nil && e["message"] == nil {
		t.Errorf("error answer %s has no error or message", answer)
	}
}

// bearer is a header with a bearer key.
func bearer() http.Header { return http.Header{"Authorization": {"Bearer k"}} }

// codePointText is text's code points [start, end).
func codePointText(text string, start, end int) string {
	runes := []rune(text)
	if start < 0 || start > end || end > len(runes) {
		return "out of range"
	}
	return string(runes[start:end])
}

// The generic contract's emulator blocks a Flagged match with its
// findings in code points, allows the rest, takes an optional bearer key,
// and refuses a body that is not the contract's.
func TestGeneric(t *testing.T) {
	type finding struct {
		Type       string
		Start, End int
		Score      float64
	}
	type answer struct {
		Action   string
		Findings []finding
	}
	text := "Grüße zebra-42 und Forbidden-Word"
	for _, tt := range []struct {
		name   string
		header http.Header
		body   string
		status int
		want   answer
	}{
		{"clean", nil, `{"text":"hello","context":{"stage":"request"}}`, 200, answer{"allow", []finding{}}},
		{"flagged, after non-ASCII", bearer(), `{"text":"` + text + `","context":{"stage":"response"}}`, 200,
			answer{"block", []finding{{"ZEBRA", 6, 14, 0.9}, {"FORBIDDEN", 19, 33, 0.9}}}},
		{"unknown stage", nil, `{"text":"hello","context":{"stage":"later"}}`, 400, answer{}},
		{"no text", nil, `{"context":{"stage":"request"}}`, 400, answer{}},
		{"not JSON", nil, `{"text":`, 400, answer{}},
		{"malformed Authorization", http.Header{"Authorization": {"Basic x"}}, `{"text":"hello","context":{"stage":"request"}}`, 401, answer{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got answer
			status, b := post(t, "/http/check", tt.header, tt.body)
			checkStatus(t, status, tt.status, b, &got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	if got := codePointText(text, 6, 14); got != "zebra-42" {
		t.Errorf("code points [6, 14) of %q are %q, want zebra-42", text, got)
	}
}
