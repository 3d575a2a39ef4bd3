package guards

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"modelgate/translate/bedrock"
)

// applyRequest is an ApplyGuardrail request for text, signed with creds
// (none: unsigned).
func applyRequest(creds bedrock.Credentials, text string) *http.Request {
	body, _ := json.Marshal(map[string]any{"source": "INPUT", "content": []any{map[string]any{"text": map[string]string{"text": text}}}})
	r := httptest.NewRequest("POST", "http://guards.test/guard/guardrail/gr1/version/DRAFT/apply", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	if creds.AccessKeyID != "" {
		for _, h := range bedrock.Sign(creds, "us-east-1", "POST", r.Host, r.URL.EscapedPath(), "application/json", body, time.Now()) {
			r.Header.Set(h.Name, h.Value)
		}
	}
	return r
}

// emulatorAnswer is the emulators' answer to r: its status, headers
// and JSON body.
func emulatorAnswer(t *testing.T, r *http.Request) (int, http.Header, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	Handler("/guard").ServeHTTP(w, r)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	return w.Code, w.Header(), out
}

func TestApplyGuardrail(t *testing.T) {
	creds := bedrock.Credentials{AccessKeyID: AWSAccessKeyID, SecretAccessKey: AWSSecretAccessKey, SessionToken: "tok"}
	code, _, out := emulatorAnswer(t, applyRequest(creds, "a harmless question"))
	if code != http.StatusOK || out["action"] != "NONE" {
		t.Errorf("clean: %d %v", code, out)
	}
	code, _, out = emulatorAnswer(t, applyRequest(creds, "call zebra-42 or FORBIDDEN-WORD"))
	want := map[string]any{"sensitiveInformationPolicy": map[string]any{"regexes": []any{
		map[string]any{"name": "ZEBRA", "match": "zebra-42", "regex": Flagged.String(), "action": "ANONYMIZED", "detected": true},
		map[string]any{"name": "ZEBRA", "match": "FORBIDDEN-WORD", "regex": Flagged.String(), "action": "ANONYMIZED", "detected": true},
	}}}
	if code != http.StatusOK || out["action"] != "GUARDRAIL_INTERVENED" || !reflect.DeepEqual(out["assessments"], []any{want}) ||
		!reflect.DeepEqual(out["outputs"], []any{map[string]any{"text": "call {ZEBRA} or {ZEBRA}"}}) {
		t.Errorf("flagged: %d %v", code, out)
	}
}

func TestApplyGuardrailRefusesUnsigned(t *testing.T) {
	tests := []struct {
		name  string
		creds bedrock.Credentials
		kind  string
	}{
		{"unsigned", bedrock.Credentials{}, "MissingAuthenticationTokenException"},
		{"unknown key", bedrock.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: AWSSecretAccessKey}, "UnrecognizedClientException"},
		{"wrong secret", bedrock.Credentials{AccessKeyID: AWSAccessKeyID, SecretAccessKey: "wrong"}, "InvalidSignatureException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, h, out := emulatorAnswer(t, applyRequest(tt.creds, "zebra-1"))
			if code != http.StatusForbidden || h.Get("X-Amzn-Errortype") != tt.kind || out["message"] == "" || len(out) != 1 {
				t.Errorf("%d %s %v", code, h.Get("X-Amzn-Errortype"), out)
			}
		})
	}
	t.Run("tampered body", func(t *testing.T) {
		r := applyRequest(bedrock.Credentials{AccessKeyID: AWSAccessKeyID, SecretAccessKey: AWSSecretAccessKey}, "zebra-1")
		r.Body = http.NoBody
		r.ContentLength = 0
		if code, _, _ := emulatorAnswer(t, r); code != http.StatusForbidden {
			t.Errorf("%d", code)
		}
	})
}
