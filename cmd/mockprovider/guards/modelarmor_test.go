package guards

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// sanitizeRequest is a Model Armor request of verb with body.
func sanitizeRequest(verb, body string) *http.Request {
	r := httptest.NewRequest("POST", "http://guards.test/guard/v1/projects/p/locations/us-central1/templates/t1:"+verb, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer ya29.token")
	return r
}

func TestModelArmor(t *testing.T) {
	tests := []struct {
		name, verb, body, state string
	}{
		{"clean prompt", "sanitizeUserPrompt", `{"userPromptData":{"text":"hello"}}`, "NO_MATCH_FOUND"},
		{"flagged prompt", "sanitizeUserPrompt", `{"userPromptData":{"text":"hi zebra-7"}}`, "MATCH_FOUND"},
		{"clean response", "sanitizeModelResponse", `{"modelResponseData":{"text":"hello"}}`, "NO_MATCH_FOUND"},
		{"flagged response", "sanitizeModelResponse", `{"modelResponseData":{"text":"a forbidden-word"}}`, "MATCH_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, out := emulatorAnswer(t, sanitizeRequest(tt.verb, tt.body))
			result, _ := out["sanitizationResult"].(map[string]any)
			if code != http.StatusOK || result["filterMatchState"] != tt.state || result["invocationResult"] != "SUCCESS" {
				t.Errorf("%d %v", code, out)
			}
		})
	}
}

func TestModelArmorRefuses(t *testing.T) {
	unauthenticated := sanitizeRequest("sanitizeUserPrompt", `{"userPromptData":{"text":"hello"}}`)
	unauthenticated.Header.Del("Authorization")
	tests := []struct {
		name   string
		r      *http.Request
		code   int
		status string
	}{
		{"no token", unauthenticated, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"unknown verb", sanitizeRequest("sanitizeEverything", `{}`), http.StatusNotFound, "NOT_FOUND"},
		{"wrong member", sanitizeRequest("sanitizeUserPrompt", `{"modelResponseData":{"text":"hello"}}`), http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"not JSON", sanitizeRequest("sanitizeModelResponse", `{`), http.StatusBadRequest, "INVALID_ARGUMENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, out := emulatorAnswer(t, tt.r)
			e, _ := out["error"].(map[string]any)
			if code != tt.code || e["status"] != tt.status || e["code"] != float64(tt.code) || e["message"] == "" {
				t.Errorf("%d %v", code, out)
			}
		})
	}
}
