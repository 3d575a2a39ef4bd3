// Package messages serves Anthropic's Messages API, the gateway's second
// front door, on providers that do not speak it: a Messages request
// becomes a chat completion request (ToChat) for the provider's chat
// translator, and its answer, JSON or stream, becomes the Messages API's
// (NewBridge). Providers that speak the Messages API (Anthropic) get the
// request as sent instead (anthropic.NewMessages).
package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"modelgate/translate/api"
)

// request is the part of a Messages request the bridge reads.
type request struct {
	Model         string          `json:"model"`
	System        json.RawMessage `json:"system"`
	Messages      []turn          `json:"messages"`
	Tools         []tool          `json:"tools"`
	ToolChoice    *toolChoice     `json:"tool_choice"`
	MaxTokens     *int64          `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Thinking      *thinking       `json:"thinking"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	OutputConfig *struct {
		Effort string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

type turn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is a content block of a turn or of the system prompt.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	// image and document
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	Title string `json:"title"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// thinking and redacted_thinking
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
}

type tool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

// blocks reads content: a string is one text block.
func blocks(param string, raw json.RawMessage) ([]block, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}, nil
	}
	var out []block
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, api.Invalid(param, "Content must be a string or an array of content blocks.")
	}
	return out, nil
}

// chatPart is an OpenAI content part.
type chatPart map[string]any

// chatMessage is an OpenAI chat message.
type chatMessage map[string]any

// ToChat is the chat completion request a Messages request asks for, for
// a provider's chat translator: the system prompt as a system message,
// each turn as messages (tool results as tool messages, before the turn's
// other content; tool uses as tool calls; thinking as thinking_blocks,
// signatures kept), tools as functions, cache markers where chat's
// parts and tools take them, and thinking's budget as a reasoning effort.
// Tools the provider runs itself (Anthropic's server tools) are left out
// and named in the returned warning.
func ToChat(r *api.MessagesRequest) (*api.ChatRequest, string, error) {
	var in request
	if err := json.Unmarshal(r.Body, &in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, "", api.Invalid(te.Field, "'%s' is of the wrong type: a %s was given.", te.Field, te.Value)
		}
		return nil, "", api.Invalid("", "The request is not a Messages API request.")
	}
	out := map[string]any{"model": r.Model}
	var msgs []chatMessage
	if len(in.System) > 0 && string(in.System) != "null" {
		sys, err := blocks("system", in.System)
		if err != nil {
			return nil, "", err
		}
		parts := make([]chatPart, 0, len(sys))
		for _, b := range sys {
			parts = append(parts, textPart(b))
		}
		msgs = append(msgs, chatMessage{"role": "system", "content": parts})
	}
	for i, t := range in.Messages {
		param := fmt.Sprintf("messages[%d].content", i)
		bs, err := blocks(param, t.Content)
		if err != nil {
			return nil, "", err
		}
		var converted []chatMessage
		switch t.Role {
		case "assistant":
			converted, err = assistant(param, bs)
		case "system":
			parts := make([]chatPart, 0, len(bs))
			for _, b := range bs {
				parts = append(parts, textPart(b))
			}
			converted = []chatMessage{{"role": "system", "content": parts}}
		default:
			converted, err = user(param, bs)
		}
		if err != nil {
			return nil, "", err
		}
		msgs = append(msgs, converted...)
	}
	out["messages"] = msgs
	var skipped []string
	var tools []map[string]any
	for _, t := range in.Tools {
		if t.Type != "" && t.Type != "custom" {
			skipped = append(skipped, t.Type)
			continue
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		fn := map[string]any{"name": t.Name, "parameters": schema}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		ct := map[string]any{"type": "function", "function": fn}
		if len(t.CacheControl) > 0 {
			ct["cache_control"] = t.CacheControl
		}
		tools = append(tools, ct)
	}
	if len(tools) > 0 {
		out["tools"] = tools
		if c := in.ToolChoice; c != nil {
			switch c.Type {
			case "auto":
				out["tool_choice"] = "auto"
			case "any":
				out["tool_choice"] = "required"
			case "none":
				out["tool_choice"] = "none"
			case "tool":
				out["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": c.Name}}
			}
			if c.DisableParallelToolUse {
				out["parallel_tool_calls"] = false
			}
		}
	}
	if in.MaxTokens != nil {
		out["max_completion_tokens"] = *in.MaxTokens
	}
	if in.Temperature != nil {
		out["temperature"] = min(*in.Temperature, 2)
	}
	if in.TopP != nil {
		out["top_p"] = *in.TopP
	}
	if len(in.StopSequences) > 0 {
		out["stop"] = in.StopSequences
	}
	if in.Stream {
		out["stream"], out["stream_options"] = true, map[string]any{"include_usage": true}
	}
	if effort := reasoningEffort(in); effort != "" {
		out["reasoning_effort"] = effort
	}
	if in.Metadata != nil && in.Metadata.UserID != "" {
		out["user"] = in.Metadata.UserID
	}
	if oc := in.OutputConfig; oc != nil && oc.Format != nil && oc.Format.Type == "json_schema" {
		out["response_format"] = map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "output", "schema": oc.Format.Schema, "strict": true}}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, "", err
	}
	chat, err := api.ParseChatRequest(body)
	if err != nil {
		return nil, "", err
	}
	warning := ""
	if len(skipped) > 0 {
		warning = "tools the provider cannot run were left out: " + strings.Join(skipped, ", ")
	}
	return chat, warning, nil
}

// reasoningEffort is the chat reasoning effort of a request's thinking
// budget (or output_config.effort), the inverse of the budgets the
// gateway gives efforts on Anthropic; none when thinking is off.
func reasoningEffort(in request) string {
	if in.OutputConfig != nil {
		switch in.OutputConfig.Effort {
		case "low", "medium", "high":
			return in.OutputConfig.Effort
		case "max", "xhigh":
			return "high"
		}
	}
	if in.Thinking == nil {
		return ""
	}
	switch in.Thinking.Type {
	case "enabled":
		switch b := in.Thinking.BudgetTokens; {
		case b <= 1024:
			return "minimal"
		case b <= 4096:
			return "low"
		case b <= 16384:
			return "medium"
		}
		return "high"
	case "adaptive":
		return "medium"
	}
	return ""
}

// textPart is a text block as a chat text part, its cache marker kept.
func textPart(b block) chatPart {
	p := chatPart{"type": "text", "text": b.Text}
	if len(b.CacheControl) > 0 {
		p["cache_control"] = b.CacheControl
	}
	return p
}

// user maps a user turn: its tool results as tool messages (chat has them
// right after the assistant's calls), then its other content as a user
// message.
func user(param string, bs []block) ([]chatMessage, error) {
	var out []chatMessage
	var parts []chatPart
	for j, b := range bs {
		p := fmt.Sprintf("%s[%d]", param, j)
		switch b.Type {
		case "text":
			parts = append(parts, textPart(b))
		case "image":
			url, err := sourceURL(p, b)
			if err != nil {
				return nil, err
			}
			parts = append(parts, chatPart{"type": "image_url", "image_url": map[string]any{"url": url}})
		case "document":
			if b.Source == nil || b.Source.Type != "base64" {
				if b.Source != nil && b.Source.Type == "text" {
					parts = append(parts, chatPart{"type": "text", "text": b.Source.Data})
					continue
				}
				return nil, api.Invalid(p+".source", "This provider takes documents as base64 data only.")
			}
			name := b.Title
			if name == "" {
				name = "document"
			}
			parts = append(parts, chatPart{"type": "file", "file": map[string]any{"filename": name,
				"file_data": "data:" + b.Source.MediaType + ";base64," + b.Source.Data}})
		case "tool_result":
			text, err := resultText(p+".content", b.Content)
			if err != nil {
				return nil, err
			}
			if b.IsError && text == "" {
				text = "error"
			}
			m := chatMessage{"role": "tool", "tool_call_id": b.ToolUseID, "content": text}
			if len(b.CacheControl) > 0 {
				m["cache_control"] = b.CacheControl
			}
			out = append(out, m)
		default:
			return nil, api.Invalid(p+".type", "This provider does not take '%s' blocks in user turns.", b.Type)
		}
	}
	if len(parts) > 0 {
		out = append(out, chatMessage{"role": "user", "content": parts})
	}
	return out, nil
}

// sourceURL is an image block's source as chat's image URL: a data URI
// of base64 data, or the URL.
func sourceURL(param string, b block) (string, error) {
	switch {
	case b.Source == nil:
		return "", api.Invalid(param+".source", "An image block needs a source.")
	case b.Source.Type == "base64":
		return "data:" + b.Source.MediaType + ";base64," + b.Source.Data, nil
	case b.Source.Type == "url":
		return b.Source.URL, nil
	}
	return "", api.Invalid(param+".source.type", "Image sources are base64 or url, not '%s'.", b.Source.Type)
}

// resultText is a tool result's content as text: a string, or its text
// blocks joined.
func resultText(param string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	bs, err := blocks(param, raw)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, b := range bs {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// assistant maps an assistant turn: its text as content, its tool uses as
// tool calls, its thinking as thinking_blocks (signatures kept, for the
// provider the gateway's chat translator sends them back to).
func assistant(param string, bs []block) ([]chatMessage, error) {
	var text []string
	var calls []map[string]any
	var thinking []api.ThinkingBlock
	var marker json.RawMessage
	for j, b := range bs {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			args := string(b.Input)
			if args == "" || args == "null" {
				args = "{}"
			}
			calls = append(calls, map[string]any{"id": b.ID, "type": "function", "function": map[string]any{"name": b.Name, "arguments": args}})
		case "thinking":
			thinking = append(thinking, api.ThinkingBlock{Type: "thinking", Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			thinking = append(thinking, api.ThinkingBlock{Type: "redacted_thinking", Data: b.Data})
		default:
			return nil, api.Invalid(fmt.Sprintf("%s[%d].type", param, j), "This provider does not take '%s' blocks in assistant turns.", b.Type)
		}
		if len(b.CacheControl) > 0 {
			marker = b.CacheControl
		}
	}
	m := chatMessage{"role": "assistant"}
	if len(text) > 0 {
		m["content"] = strings.Join(text, "")
	} else {
		m["content"] = nil
	}
	if len(calls) > 0 {
		m["tool_calls"] = calls
	}
	if len(thinking) > 0 {
		m["thinking_blocks"] = thinking
	}
	if marker != nil {
		m["cache_control"] = marker
	}
	return []chatMessage{m}, nil
}
