package guards

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

func init() {
	routes = append(routes, route{"POST /judge/v1/chat/completions", judge})
}

// judge emulates a chat model judging with Llama Guard 3's prompt
// (www.llama.com/docs/model-cards-and-prompt-formats/llama-guard-3)
// through OpenAI's chat completions: it answers "unsafe\nS1" when the
// prompt's conversation (not its category list) has something Flagged,
// else "safe". Any bearer token authenticates.
func judge(w http.ResponseWriter, r *http.Request) {
	if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || key == "" {
		judgeError(w, http.StatusUnauthorized, "You didn't provide an API key.")
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req) != nil || req.Model == "" || len(req.Messages) == 0 {
		judgeError(w, http.StatusBadRequest, "model and messages (with text content) are required")
		return
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	verdict := "safe"
	if Flagged.MatchString(judgedConversation(prompt)) {
		verdict = "unsafe\nS1"
	}
	emitJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-guard-judge", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": verdict, "refusal": nil},
			"logprobs": nil, "finish_reason": "stop"}},
		"usage": map[string]any{"prompt_tokens": len(prompt) / 4, "completion_tokens": 2, "total_tokens": len(prompt)/4 + 2},
	})
}

// judgedConversation is the part of a Llama Guard prompt between its
// conversation markers (all of it without them).
func judgedConversation(prompt string) string {
	if _, after, ok := strings.Cut(prompt, "<BEGIN CONVERSATION>"); ok {
		prompt = after
	}
	if i := strings.LastIndex(prompt, "<END CONVERSATION>"); i >= 0 {
		prompt = prompt[:i]
	}
	return prompt
}

// judgeError answers as OpenAI's API fails (an unauthenticated request
// with code invalid_api_key).
func judgeError(w http.ResponseWriter, status int, msg string) {
	var code any
	if status == http.StatusUnauthorized {
		code = "invalid_api_key"
	}
	emitJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
}
