package responses

import (
	"encoding/json"
	"fmt"

	"modelgate/translate/api"
)

// item is an input item, as far as the bridge reads it.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
}

// chat is the chat completions request under construction.
type chat struct {
	Model            string            `json:"model"`
	Messages         []json.RawMessage `json:"messages"`
	Stream           bool              `json:"stream,omitempty"`
	StreamOptions    *json.RawMessage  `json:"stream_options,omitempty"`
	MaxTokens        json.RawMessage   `json:"max_completion_tokens,omitempty"`
	Temperature      json.RawMessage   `json:"temperature,omitempty"`
	TopP             json.RawMessage   `json:"top_p,omitempty"`
	Tools            []json.RawMessage `json:"tools,omitempty"`
	ToolChoice       json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCall json.RawMessage   `json:"parallel_tool_calls,omitempty"`
	ResponseFormat   json.RawMessage   `json:"response_format,omitempty"`
	ReasoningEffort  string            `json:"reasoning_effort,omitempty"`
	User             json.RawMessage   `json:"user,omitempty"`
}

// Items returns the request's input as items: a string input is one user
// message.
func (r *Request) Items() ([]json.RawMessage, error) {
	raw := r.Members["input"]
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": s})
		return []json.RawMessage{b}, nil
	}
	var items []json.RawMessage
	err := json.Unmarshal(raw, &items)
	return items, err
}

// ToChat builds the chat completions request for the provider translators:
// instructions, then history (the items of earlier turns, from the
// conversation store), then this request's input.
func ToChat(r *Request, history []json.RawMessage) (*api.ChatRequest, error) {
	m := r.Members
	c := chat{Model: r.Model, Stream: r.Stream, MaxTokens: m["max_output_tokens"], Temperature: m["temperature"],
		TopP: m["top_p"], ParallelToolCall: m["parallel_tool_calls"], User: m["user"]}
	if r.Stream {
		opts := json.RawMessage(`{"include_usage":true}`)
		c.StreamOptions = &opts
	}
	var instructions string
	if json.Unmarshal(m["instructions"], &instructions) == nil && instructions != "" {
		b, _ := json.Marshal(map[string]string{"role": "system", "content": instructions})
		c.Messages = append(c.Messages, b)
	}
	input, err := r.Items()
	if err != nil {
		return nil, &api.RequestError{Param: "input", Code: "invalid_type", Message: "Invalid 'input'."}
	}
	if err := c.addItems(append(append([]json.RawMessage(nil), history...), input...)); err != nil {
		return nil, err
	}
	if err := c.setTools(m); err != nil {
		return nil, err
	}
	c.setReasoningAndFormat(m)
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return api.ParseChatRequest(body)
}

// addItems turns items into messages; consecutive function calls become
// one assistant message with several tool calls.
func (c *chat) addItems(items []json.RawMessage) error {
	var calls []map[string]any
	flush := func() {
		if len(calls) > 0 {
			b, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
			c.Messages, calls = append(c.Messages, b), nil
		}
	}
	for i, raw := range items {
		var it item
		if err := json.Unmarshal(raw, &it); err != nil {
			return api.Invalid(fmt.Sprintf("input[%d]", i), "Invalid input item.")
		}
		switch {
		case it.Type == "function_call":
			calls = append(calls, map[string]any{"id": it.CallID, "type": "function",
				"function": map[string]any{"name": it.Name, "arguments": it.Arguments}})
			continue
		case it.Type == "reasoning":
			continue // reasoning is the provider's; it is not replayed
		}
		flush()
		msg, err := message(i, it)
		if err != nil {
			return err
		}
		c.Messages = append(c.Messages, msg)
	}
	flush()
	return nil
}

func message(i int, it item) (json.RawMessage, error) {
	switch {
	case it.Type == "function_call_output":
		var output string
		if json.Unmarshal(it.Output, &output) != nil {
			output = string(it.Output)
		}
		return json.Marshal(map[string]any{"role": "tool", "tool_call_id": it.CallID, "content": output})
	case it.Type == "message" || it.Type == "" && it.Role != "":
		content, err := chatContent(i, it.Content)
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"role": it.Role, "content": content})
	}
	return nil, api.Invalid(fmt.Sprintf("input[%d].type", i), "Unsupported input item type '%s'.", it.Type)
}

// chatContent maps input_text/output_text/input_image parts to chat parts.
func chatContent(i int, raw json.RawMessage) (any, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if json.Unmarshal(raw, &parts) != nil {
		return nil, api.Invalid(fmt.Sprintf("input[%d].content", i), "Expected a string or an array of content parts.")
	}
	var out []map[string]any
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case "input_image":
			out = append(out, map[string]any{"type": "image_url", "image_url": map[string]string{"url": p.ImageURL}})
		default:
			return nil, api.Invalid(fmt.Sprintf("input[%d].content[%d].type", i, j), "Unsupported content part '%s'.", p.Type)
		}
	}
	return out, nil
}

// setTools maps Responses function tools ({type, name, parameters}) to
// chat tools ({type, function: {...}}).
func (c *chat) setTools(m map[string]json.RawMessage) error {
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	if !isNull(m["tools"]) && json.Unmarshal(m["tools"], &tools) != nil {
		return &api.RequestError{Param: "tools", Code: "invalid_type", Message: "Invalid type for 'tools': expected an array."}
	}
	for i, t := range tools {
		if t.Type != "function" {
			return api.Invalid(fmt.Sprintf("tools[%d].type", i), "Only function tools are supported, got '%s'.", t.Type)
		}
		fn := map[string]any{"name": t.Name, "parameters": t.Parameters}
		if t.Description != nil {
			fn["description"] = *t.Description
		}
		if t.Strict != nil {
			fn["strict"] = *t.Strict
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
		c.Tools = append(c.Tools, b)
	}
	return c.setToolChoice(m["tool_choice"])
}

func (c *chat) setToolChoice(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c.ToolChoice = raw
		return nil
	}
	var named struct{ Type, Name string }
	if json.Unmarshal(raw, &named) != nil || named.Type != "function" || named.Name == "" {
		return api.Invalid("tool_choice", "Invalid 'tool_choice'.")
	}
	c.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
	return nil
}

// setReasoningAndFormat maps reasoning.effort and text.format.
func (c *chat) setReasoningAndFormat(m map[string]json.RawMessage) {
	var reasoning struct{ Effort string }
	if json.Unmarshal(m["reasoning"], &reasoning) == nil {
		c.ReasoningEffort = reasoning.Effort
	}
	var text struct {
		Format struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	}
	if json.Unmarshal(m["text"], &text) != nil {
		return
	}
	switch f := text.Format; f.Type {
	case "json_object":
		c.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
	case "json_schema":
		c.ResponseFormat, _ = json.Marshal(map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}})
	}
}
