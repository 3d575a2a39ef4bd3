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
	"slices"
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
// Tools the provider runs itself (Anthropic's server tools) are left out,
// and so are the blocks they left in the conversation (serverToolBlocks);
// both are named in the returned warning.
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
	msgs, history, err := chatMessages(in)
	if err != nil {
		return nil, "", err
	}
	out["messages"] = msgs
	skipped := setTools(out, in)
	setParams(out, in)
	body, err := json.Marshal(out)
	if err != nil {
		return nil, "", err
	}
	chat, err := api.ParseChatRequest(body)
	if err != nil {
		return nil, "", err
	}
	return chat, warning(skipped, history), nil
}

// serverToolBlocks are the content block types Anthropic's server tools
// (web search and fetch, code execution, tool search, the advisor, the
// MCP connector) and container uploads for code execution leave in a
// conversation, as Anthropic's API reference lists them: records of tools
// that ran on Anthropic's side, which mean nothing to another provider.
// They are left out as the tools are, the text around them kept (a web
// search's findings are in the text that cites them).
var serverToolBlocks = map[string]bool{
	"server_tool_use": true, "web_search_tool_result": true, "web_fetch_tool_result": true,
	"code_execution_tool_result": true, "bash_code_execution_tool_result": true,
	"text_editor_code_execution_tool_result": true, "tool_search_tool_result": true, "advisor_tool_result": true,
	"mcp_tool_use": true, "mcp_tool_result": true, "container_upload": true,
}

// warning names what the request lost: the tools left out and the types
// of the server tool blocks left out of the conversation.
func warning(tools, history []string) string {
	var parts []string
	if len(tools) > 0 {
		parts = append(parts, "tools the provider cannot run were left out: "+strings.Join(tools, ", "))
	}
	if len(history) > 0 {
		parts = append(parts, "server tool blocks were left out of the conversation: "+strings.Join(history, ", "))
	}
	return strings.Join(parts, "; ")
}

// chatMessages maps the system prompt and the turns. It returns the types
// of the server tool blocks left out, in the order they first came.
func chatMessages(in request) ([]chatMessage, []string, error) {
	var msgs []chatMessage
	if len(in.System) > 0 && string(in.System) != "null" {
		sys, err := blocks("system", in.System)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, systemMessage(sys))
	}
	var left []string
	for i, t := range in.Messages {
		param := fmt.Sprintf("messages[%d].content", i)
		bs, err := blocks(param, t.Content)
		if err != nil {
			return nil, nil, err
		}
		for _, b := range bs {
			if serverToolBlocks[b.Type] && !slices.Contains(left, b.Type) {
				left = append(left, b.Type)
			}
		}
		converted, err := turnMessages(param, t.Role, bs)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, converted...)
	}
	return msgs, left, nil
}

// turnMessages maps a turn of role.
func turnMessages(param, role string, bs []block) ([]chatMessage, error) {
	switch role {
	case "assistant":
		return assistant(param, bs)
	case "system":
		return []chatMessage{systemMessage(bs)}, nil
	}
	return user(param, bs)
}

func systemMessage(bs []block) chatMessage {
	parts := make([]chatPart, 0, len(bs))
	for _, b := range bs {
		parts = append(parts, textPart(b))
	}
	return chatMessage{"role": "system", "content": parts}
}

// setTools sets the chat tools and tool choice of the request's custom
// tools, and returns the types of the tools left out.
func setTools(out map[string]any, in request) []string {
	var skipped []string
	var tools []map[string]any
	for _, t := range in.Tools {
		if t.Type != "" && t.Type != "custom" {
			skipped = append(skipped, t.Type)
			continue
		}
		tools = append(tools, chatTool(t))
	}
	if len(tools) > 0 {
		out["tools"] = tools
		setToolChoice(out, in.ToolChoice)
	}
	return skipped
}

func chatTool(t tool) map[string]any {
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
	return ct
}

func setToolChoice(out map[string]any, c *toolChoice) {
	if c == nil {
		return
	}
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

// setParams sets the members that shape the answer.
func setParams(out map[string]any, in request) {
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
		if serverToolBlocks[b.Type] {
			continue
		}
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

// assistant maps an assistant turn: its text as content (citations
// dropped: chat has no place for them), its tool uses as tool calls, its
// thinking as thinking_blocks (signatures kept, for the provider the
// gateway's chat translator sends them back to). A turn left with neither
// text nor tool calls once its server tool blocks are left out, or empty,
// is no message: a chat assistant message needs content or tool calls,
// and thinking about running tools the provider never sees is not worth
// sending.
func assistant(param string, bs []block) ([]chatMessage, error) {
	var text []string
	var calls []map[string]any
	var thinking []api.ThinkingBlock
	var marker json.RawMessage
	dropped := false
	for j, b := range bs {
		if len(b.CacheControl) > 0 {
			marker = b.CacheControl
		}
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
			if !serverToolBlocks[b.Type] {
				return nil, api.Invalid(fmt.Sprintf("%s[%d].type", param, j), "This provider does not take '%s' blocks in assistant turns.", b.Type)
			}
			dropped = true
		}
	}
	if len(text) == 0 && len(calls) == 0 && (dropped || len(thinking) == 0) {
		return nil, nil
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
