package scripted

import (
	"encoding/json"
	"net/http"
	"time"
)

// chatRequest is the part of a chat completions request the model reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice      json.RawMessage `json:"tool_choice"`
	ReasoningEffort string          `json:"reasoning_effort"`
	ResponseFormat  *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// Chat answers OpenAI's POST /v1/chat/completions. OpenAI's chat API
// returns no reasoning, so the turn's thought is not sent.
func Chat(w http.ResponseWriter, body []byte) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		openaiError(w, refuse("We could not parse the JSON body of your request."))
		return
	}
	c := Conversation{InputChars: len(body), Reasoning: req.ReasoningEffort != "" && req.ReasoningEffort != "none", MustCall: mustCall(req.ToolChoice)}
	for _, t := range req.Tools {
		c.Tools = append(c.Tools, Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	if rf := req.ResponseFormat; rf != nil && rf.JSONSchema != nil {
		c.Schema = rf.JSONSchema.Schema
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			c.Prompt, c.Results = text(m.Content), nil
		case "tool":
			c.Results = append(c.Results, text(m.Content))
		}
	}
	t := Answer(c)
	id, created := newID("chatcmpl-scripted"), time.Now().Unix()
	usage := map[string]any{"prompt_tokens": t.InputTokens, "completion_tokens": t.OutputTokens, "total_tokens": t.InputTokens + t.OutputTokens}
	var calls []map[string]any
	finish := "stop"
	if t.Call != nil {
		finish = "tool_calls"
		calls = []map[string]any{{"id": newID("call_scripted"), "type": "function", "function": map[string]any{"name": t.Call.Name, "arguments": t.Call.Arguments}}}
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		if calls != nil {
			msg["tool_calls"] = calls
		} else {
			msg["content"] = t.Text
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}}, "usage": usage})
		return
	}
	s := startSSE(w)
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
		if includeUsage {
			c["usage"] = nil
		}
		s.event("", c)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if calls != nil {
		call := calls[0]
		fn := call["function"].(map[string]any)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": call["id"], "type": "function", "function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil)
		for _, p := range pieces(t.Call.Arguments) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": p}}}}, nil)
		}
	} else {
		for _, p := range pieces(t.Text) {
			chunk(map[string]any{"content": p}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	if includeUsage {
		s.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{}, "usage": usage})
	}
	s.event("", "[DONE]")
}

// mustCall reports whether a tool_choice requires a call: "required", or a
// named function.
func mustCall(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s == "required"
	}
	return len(raw) > 0 && string(raw) != "null"
}

func openaiError(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": err.Error(), "type": "invalid_request_error", "param": nil, "code": nil}})
}
