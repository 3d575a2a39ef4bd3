package guards

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// judgeRequest is a chat completion request whose one message is prompt.
func judgeRequest(prompt string) *http.Request {
	body, _ := json.Marshal(map[string]any{"model": "llama-guard-3", "messages": []any{map[string]string{"role": "user", "content": prompt}}})
	r := httptest.NewRequest("POST", "http://guards.test/guard/judge/v1/chat/completions", strings.NewReader(string(body)))
	r.Header.Set("Authorization", "Bearer sk-test")
	return r
}

func TestJudge(t *testing.T) {
	const categories = "<BEGIN UNSAFE CONTENT CATEGORIES>\nS1: zebra-1 crimes.\n<END UNSAFE CONTENT CATEGORIES>\n\n"
	tests := []struct {
		name, prompt, want string
	}{
		{"clean", categories + "<BEGIN CONVERSATION>\n\nUser: hello\n\n<END CONVERSATION>\n\nProvide...", "safe"},
		{"flagged", categories + "<BEGIN CONVERSATION>\n\nAgent: hi zebra-42\n\n<END CONVERSATION>\n\nProvide...", "unsafe\nS1"},
		{"flagged after the conversation only", categories + "<BEGIN CONVERSATION>\n\nUser: hi\n\n<END CONVERSATION>\n\nforbidden-word", "safe"},
		{"no markers", "is zebra-9 safe?", "unsafe\nS1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, out := emulatorAnswer(t, judgeRequest(tt.prompt))
			var c struct {
				Object  string
				Model   string
				Choices []struct {
					Message      struct{ Role, Content string }
					FinishReason string `json:"finish_reason"`
				}
			}
			b, _ := json.Marshal(out)
			if err := json.Unmarshal(b, &c); err != nil || code != http.StatusOK || c.Object != "chat.completion" || c.Model != "llama-guard-3" ||
				len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Choices[0].Message.Content != tt.want || c.Choices[0].FinishReason != "stop" {
				t.Errorf("%d %s", code, b)
			}
		})
	}
}

func TestJudgeRefuses(t *testing.T) {
	unauthenticated := judgeRequest("hello")
	unauthenticated.Header.Del("Authorization")
	noMessages := httptest.NewRequest("POST", "http://guards.test/guard/judge/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
	noMessages.Header.Set("Authorization", "Bearer sk-test")
	for name, tt := range map[string]struct {
		r    *http.Request
		code int
	}{
		"no key":      {unauthenticated, http.StatusUnauthorized},
		"no messages": {noMessages, http.StatusBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, out := emulatorAnswer(t, tt.r)
			if e, _ := out["error"].(map[string]any); code != tt.code || e["message"] == "" {
				t.Errorf("%d %v", code, out)
			}
		})
	}
}
