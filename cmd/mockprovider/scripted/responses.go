package scripted

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// responsesRequest is the part of a Responses request the model reads.
type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	Tools  []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Reasoning  *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Text *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
	Include            []string `json:"include"`
	PreviousResponseID string   `json:"previous_response_id"`
	Store              *bool    `json:"store"`
}

// responsesItem is an input item.
type responsesItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent string          `json:"encrypted_content"`
}

// encryptedPrefix starts the model's encrypted reasoning: its signature,
// then the thought in base64.
const encryptedPrefix = "scripted:"

func encrypt(t Turn) string {
	return encryptedPrefix + t.Signature + ":" + base64.StdEncoding.EncodeToString([]byte(t.Thinking))
}

func decrypts(s string) bool {
	sig, thought, ok := strings.Cut(strings.TrimPrefix(s, encryptedPrefix), ":")
	b, err := base64.StdEncoding.DecodeString(thought)
	return ok && strings.HasPrefix(s, encryptedPrefix) && err == nil && Verify(string(b), sig)
}

// Responses answers OpenAI's POST /v1/responses. Reasoning comes back as
// a reasoning item, with encrypted_content when include asks for it;
// encrypted content sent back must be the model's own, and a reasoning
// item without it one the model kept. Unless store is false it keeps its
// output items (the last keptItems of them), which item_references and
// such reasoning items name; it keeps no conversations:
// previous_response_id is refused.
func Responses(w http.ResponseWriter, body []byte) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		openaiError(w, refuse("We could not parse the JSON body of your request."))
		return
	}
	if req.PreviousResponseID != "" {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "Previous response with id '" + req.PreviousResponseID + "' not found.", "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}})
		return
	}
	c := Conversation{InputChars: len(body), Reasoning: req.Reasoning != nil && req.Reasoning.Effort != "" && req.Reasoning.Effort != "none", MustCall: mustCall(req.ToolChoice)}
	freeform := map[string]bool{}
	for _, t := range req.Tools {
		switch t.Type {
		case "function":
			c.Tools = append(c.Tools, Tool{Name: t.Name, Parameters: t.Parameters})
		case "custom":
			c.Tools = append(c.Tools, Tool{Name: t.Name})
			freeform[t.Name] = true
		}
	}
	if req.Text != nil && req.Text.Format != nil && req.Text.Format.Type == "json_schema" {
		c.Schema = req.Text.Format.Schema
	}
	var items []responsesItem
	if err := json.Unmarshal(req.Input, &items); err != nil {
		var s string
		if json.Unmarshal(req.Input, &s) != nil {
			openaiError(w, refuse("Invalid 'input': expected a string or an array of items."))
			return
		}
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	}
	for i, it := range items {
		if it.Type == "item_reference" {
			raw, ok := storedItem(it.ID)
			if !ok {
				writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "Item with id '" + it.ID + "' not found.", "type": "invalid_request_error", "param": "input", "code": nil}})
				return
			}
			json.Unmarshal(raw, &it) //nolint:errcheck // the model stored it
		}
		switch {
		case it.Type == "reasoning" && it.EncryptedContent == "":
			if _, ok := storedItem(it.ID); !ok {
				writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "Item with id '" + it.ID + "' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", "type": "invalid_request_error", "param": "input", "code": nil}})
				return
			}
		case it.Type == "reasoning" && !decrypts(it.EncryptedContent):
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "The encrypted content for item " + itoa(i) + " could not be verified.", "type": "invalid_request_error", "param": nil, "code": "invalid_encrypted_content"}})
			return
		case (it.Type == "message" || it.Type == "") && it.Role == "user":
			c.Prompt, c.Results = text(it.Content), nil
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			c.Results = append(c.Results, text(it.Output))
		}
	}
	t := Answer(c)
	id, created := newID("resp_scripted"), time.Now().Unix()
	var output []map[string]any
	if t.Thinking != "" {
		r := map[string]any{"type": "reasoning", "id": newID("rs_scripted"), "summary": []any{}}
		if slices.Contains(req.Include, "reasoning.encrypted_content") {
			r["encrypted_content"] = encrypt(t)
		}
		output = append(output, r)
	}
	switch {
	case t.Call != nil && freeform[t.Call.Name]:
		output = append(output, map[string]any{"type": "custom_tool_call", "id": newID("ctc_scripted"), "call_id": newID("call_scripted"), "name": t.Call.Name, "input": t.Call.Arguments, "status": "completed"})
	case t.Call != nil:
		output = append(output, map[string]any{"type": "function_call", "id": newID("fc_scripted"), "call_id": newID("call_scripted"), "name": t.Call.Name, "arguments": t.Call.Arguments, "status": "completed"})
	default:
		output = append(output, map[string]any{"type": "message", "id": newID("msg_scripted"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": t.Text, "annotations": []any{}, "logprobs": []any{}}}})
	}
	if req.Store == nil || *req.Store {
		for _, it := range output {
			storeItem(it)
		}
	}
	reasoningTokens := 0
	if t.Thinking != "" {
		reasoningTokens = max(1, len(t.Thinking)/4)
	}
	resp := func(status string, out []map[string]any, usage any) map[string]any {
		return map[string]any{"id": id, "object": "response", "created_at": created, "status": status, "model": req.Model,
			"output": out, "usage": usage, "error": nil, "incomplete_details": nil, "instructions": nil, "metadata": map[string]any{},
			"parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": []any{}}
	}
	usage := map[string]any{"input_tokens": t.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": t.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": reasoningTokens},
		"total_tokens": t.InputTokens + t.OutputTokens}
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp("completed", output, usage))
		return
	}
	s := startSSE(w)
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		s.event(typ, fields)
	}
	event("response.created", map[string]any{"response": resp("in_progress", []map[string]any{}, nil)})
	event("response.in_progress", map[string]any{"response": resp("in_progress", []map[string]any{}, nil)})
	for i, item := range output {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["status"] = "in_progress"
		switch item["type"] {
		case "function_call":
			added["arguments"] = ""
		case "custom_tool_call":
			added["input"] = ""
		case "message":
			added["content"] = []any{}
		}
		if item["type"] == "reasoning" {
			delete(added, "status")
		}
		event("response.output_item.added", map[string]any{"output_index": i, "item": added})
		switch item["type"] {
		case "function_call":
			for _, p := range pieces(t.Call.Arguments) {
				event("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": item["id"], "delta": p})
			}
			event("response.function_call_arguments.done", map[string]any{"output_index": i, "item_id": item["id"], "arguments": t.Call.Arguments})
		case "custom_tool_call":
			event("response.custom_tool_call_input.delta", map[string]any{"output_index": i, "item_id": item["id"], "delta": t.Call.Arguments})
			event("response.custom_tool_call_input.done", map[string]any{"output_index": i, "item_id": item["id"], "input": t.Call.Arguments})
		case "message":
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}
			event("response.content_part.added", map[string]any{"output_index": i, "item_id": item["id"], "content_index": 0, "part": part})
			for _, p := range pieces(t.Text) {
				event("response.output_text.delta", map[string]any{"output_index": i, "item_id": item["id"], "content_index": 0, "delta": p, "logprobs": []any{}})
			}
			event("response.output_text.done", map[string]any{"output_index": i, "item_id": item["id"], "content_index": 0, "text": t.Text, "logprobs": []any{}})
			done := map[string]any{"type": "output_text", "text": t.Text, "annotations": []any{}, "logprobs": []any{}}
			event("response.content_part.done", map[string]any{"output_index": i, "item_id": item["id"], "content_index": 0, "part": done})
		}
		event("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	event("response.completed", map[string]any{"response": resp("completed", output, usage)})
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// keptItems is how many output items the model keeps for item_references.
const keptItems = 4096

var kept struct {
	sync.Mutex
	items map[string]json.RawMessage
	order []string
}

func storeItem(it map[string]any) {
	id, _ := it["id"].(string)
	b, _ := json.Marshal(it)
	kept.Lock()
	defer kept.Unlock()
	if kept.items == nil {
		kept.items = map[string]json.RawMessage{}
	}
	if len(kept.order) == keptItems {
		delete(kept.items, kept.order[0])
		kept.order = kept.order[1:]
	}
	kept.items[id] = b
	kept.order = append(kept.order, id)
}

func storedItem(id string) (json.RawMessage, bool) {
	kept.Lock()
	defer kept.Unlock()
	b, ok := kept.items[id]
	return b, ok
}
