package scripted

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// anthropicRequest is the part of a Messages request the model reads.
type anthropicRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		// Type names a server tool (web_search_20250305); empty, or
		// custom, for the client's own.
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
	} `json:"tool_choice"`
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	OutputConfig *struct {
		Format *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// anthropicBlock is a content block, in a request or an answer.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

func blocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	json.Unmarshal(raw, &bs) //nolint:errcheck // no blocks
	return bs
}

// Messages answers Anthropic's POST /v1/messages (and, with the same
// body, Claude's rawPredict and streamRawPredict on Vertex).
func Messages(w http.ResponseWriter, body []byte) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		anthropicError(w, refuse("messages: the body is not valid JSON"))
		return
	}
	c, err := req.conversation(len(body))
	if err != nil {
		anthropicError(w, err)
		return
	}
	t := Answer(c)
	t.cached(cacheUsage(anthropicSegments(body)))
	content := anthropicContent(t)
	stop := "end_turn"
	if t.Call != nil {
		stop = "tool_use"
	}
	id := newID("msg_scripted")
	if !req.Stream {
		usage := t.anthropicUsage(t.OutputTokens)
		if t.Search != "" {
			usage["server_tool_use"] = serverToolUse
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	s := startSSE(w)
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": t.anthropicUsage(1)}})
	for i, b := range content {
		start := b
		switch b.Type {
		case "thinking":
			start.Thinking, start.Signature = "", ""
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, p := range pieces(b.Thinking) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": p}})
			}
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b.Signature}})
		case "tool_use", "server_tool_use":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": b.Type, "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			for _, p := range pieces(string(b.Input)) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
			}
		case "web_search_tool_result": // whole in its start, as Anthropic streams it
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b})
		default:
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, p := range pieces(b.Text) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": p}})
			}
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	delta := map[string]any{"output_tokens": t.OutputTokens}
	if t.Search != "" { // message_delta's counts are cumulative; message_start has none
		delta["server_tool_use"] = serverToolUse
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": delta})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicContent is t's content blocks.
func anthropicContent(t Turn) []anthropicBlock {
	var out []anthropicBlock
	if t.Thinking != "" {
		out = append(out, anthropicBlock{Type: "thinking", Thinking: t.Thinking, Signature: t.Signature})
	}
	if t.Search != "" {
		out = append(out, webSearchBlocks(t.Search)...)
	}
	if t.Call != nil {
		return append(out, anthropicBlock{Type: "tool_use", ID: newID("toolu_scripted"), Name: t.Call.Name, Input: json.RawMessage(t.Call.Arguments)})
	}
	return append(out, anthropicBlock{Type: "text", Text: t.Text})
}

// conversation reads the request, checking its thinking as Anthropic
// does.
func (req anthropicRequest) conversation(size int) (Conversation, error) {
	c := Conversation{InputChars: size, Reasoning: req.Thinking != nil && req.Thinking.Type != "disabled"}
	if req.OutputConfig != nil && req.OutputConfig.Format != nil {
		c.Schema = req.OutputConfig.Format.Schema
	}
	for _, t := range req.Tools {
		if strings.HasPrefix(t.Type, "web_search_") {
			c.WebSearch = true // Anthropic runs it: no tool of the client's
			continue
		}
		c.Tools = append(c.Tools, Tool{Name: t.Name, Parameters: t.InputSchema})
	}
	c.MustCall = req.ToolChoice != nil && (req.ToolChoice.Type == "any" || req.ToolChoice.Type == "tool")
	if c.MustCall && c.Reasoning {
		return c, refuse("Thinking may not be enabled when tool_choice forces tool use.")
	}
	for i, m := range req.Messages {
		bs := blocks(m.Content)
		if err := checkThinking(i, bs); err != nil {
			return c, err
		}
		if m.Role == "assistant" && c.Reasoning && i == lastAssistant(req) && hasType(bs, "tool_use") && !startsWithThinking(bs) {
			return c, refuse("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", i, firstType(bs))
		}
		if m.Role != "user" {
			continue
		}
		var prompt string
		var results []string
		for _, b := range bs {
			switch b.Type {
			case "text":
				prompt = b.Text
			case "tool_result":
				results = append(results, text(b.Content))
			}
		}
		if prompt != "" {
			c.Prompt, c.Results = prompt, nil
		}
		c.Results = append(c.Results, results...)
	}
	return c, nil
}

func lastAssistant(req anthropicRequest) int {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "assistant" {
			return i
		}
	}
	return -1
}

// checkThinking refuses a thinking block the model did not sign.
func checkThinking(i int, bs []anthropicBlock) error {
	for j, b := range bs {
		if b.Type == "thinking" && !Verify(b.Thinking, b.Signature) {
			return refuse("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
		}
	}
	return nil
}

func hasType(bs []anthropicBlock, typ string) bool {
	for _, b := range bs {
		if b.Type == typ {
			return true
		}
	}
	return false
}

func startsWithThinking(bs []anthropicBlock) bool {
	return len(bs) > 0 && (bs[0].Type == "thinking" || bs[0].Type == "redacted_thinking")
}

func firstType(bs []anthropicBlock) string {
	if len(bs) == 0 {
		return "nothing"
	}
	return bs[0].Type
}

func anthropicError(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
}

// anthropicUsage is the turn's usage as Messages reports it, with output
// tokens so far.
func (t *Turn) anthropicUsage(output int) map[string]any {
	return map[string]any{"input_tokens": t.InputTokens, "output_tokens": output,
		"cache_read_input_tokens": t.CacheRead, "cache_creation_input_tokens": t.CacheWrite,
		"cache_creation": map[string]any{"ephemeral_5m_input_tokens": t.CacheWrite - t.CacheWrite1h, "ephemeral_1h_input_tokens": t.CacheWrite1h}}
}

// serverToolUse is the usage's count of a turn's one web search, as
// Anthropic reports it.
var serverToolUse = map[string]any{"web_search_requests": 1}

// webSearchBlocks are a web search for query as a Message shows it, in
// the shape of Anthropic's web search tool: the server tool's use and its
// result, one page found.
func webSearchBlocks(query string) []anthropicBlock {
	id := newID("srvtoolu_scripted")
	input, _ := json.Marshal(map[string]string{"query": query})
	result, _ := json.Marshal([]map[string]any{{"type": "web_search_result", "url": "https://example.com/search?q=" + url.QueryEscape(query),
		"title": "Results for " + query, "encrypted_content": base64.StdEncoding.EncodeToString([]byte(query)), "page_age": nil}})
	return []anthropicBlock{{Type: "server_tool_use", ID: id, Name: "web_search", Input: input},
		{Type: "web_search_tool_result", ToolUseID: id, Content: result}}
}
