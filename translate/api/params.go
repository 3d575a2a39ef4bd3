package api

import (
	"bytes"
	"encoding/json"
	"strconv"

	"modelgate/translate/jsonscan"
)

// ChatParams are the members of a chat completion request that the
// translators of providers with APIs of their own read; decode them with
// ChatRequest.Decode, which names the member of a wrong type. The request
// was validated by ParseChatRequest before.
type ChatParams struct {
	Messages            []ChatMessage   `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int64          `json:"n"`
	Tools               []Tool          `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	User                string          `json:"user"`
	ResponseFormat      *ResponseFormat `json:"response_format"`
	// WebSearchOptions asks the model to search the web.
	WebSearchOptions *WebSearchOptions `json:"web_search_options"`
}

// WebSearchOptions are chat's web_search_options: where the user roughly
// is, for local results. (search_context_size has no equivalent outside
// OpenAI.)
type WebSearchOptions struct {
	UserLocation *struct {
		Approximate Location `json:"approximate"`
	} `json:"user_location"`
}

// Location is an approximate location, as OpenAI's and Anthropic's web
// searches take it.
type Location struct {
	City     string `json:"city,omitempty"`
	Region   string `json:"region,omitempty"`
	Country  string `json:"country,omitempty"`
	Timezone string `json:"timezone,omitempty"`
}

// ChatMessage is one message of the conversation. Content stays raw: a
// string or an array of parts (TextContent and Parts read it).
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// ThinkingBlocks are an assistant message's thinking, as the gateway
	// gave it to the client (Message.ThinkingBlocks).
	ThinkingBlocks []ThinkingBlock `json:"thinking_blocks"`
	// CacheControl is a prompt caching marker on the whole message (on
	// its last block, for a provider of blocks), kept as sent.
	CacheControl json.RawMessage `json:"cache_control"`
}

// TextAndMarker reads content that must be text (TextContent), with its
// cache_control marker (Marker). param names the message.
func (m ChatMessage) TextAndMarker(param string) (string, json.RawMessage, error) {
	text, parts, err := textParts(param, m.Content)
	if err != nil {
		return "", nil, err
	}
	return text, m.Marker(parts), nil
}

// Marker is the cache_control marker of a message whose content a
// provider takes as one block: the message's own, else its last marked
// part's.
func (m ChatMessage) Marker(parts []ContentPart) json.RawMessage {
	if IsMarker(m.CacheControl) {
		return m.CacheControl
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if IsMarker(parts[i].CacheControl) {
			return parts[i].CacheControl
		}
	}
	return nil
}

// Tool is a function the model may call.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
	// CacheControl is a prompt caching marker on the tool (caching the
	// tools up to it), kept as sent.
	CacheControl json.RawMessage `json:"cache_control"`
}

// ResponseFormat is the requested output format: text, json_object, or
// json_schema with its schema.
type ResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// AnswerParams are the members of a chat request that shape its answer
// rather than its prompt. A translator reads them when it is built, so
// that its RequestBody derives nothing and can be called again.
type AnswerParams struct {
	// MaxTokens is max_completion_tokens, else max_tokens; nil for none.
	MaxTokens       *int64
	ReasoningEffort string
	// ResponseFormat is response_format.type; empty for none.
	ResponseFormat string
}

// AnswerParams reads the request's AnswerParams from its members alone,
// without decoding the conversation. A member of the wrong type reads as
// absent: the translation of the request refuses it.
func (r *ChatRequest) AnswerParams() AnswerParams {
	var p AnswerParams
	if n := PositiveInteger(r.Members, "max_completion_tokens", "max_tokens"); n > 0 {
		p.MaxTokens = &n
	}
	if raw, ok := r.Members["reasoning_effort"]; ok {
		json.Unmarshal(raw, &p.ReasoningEffort) //nolint:errcheck // wrong type: absent
	}
	if raw, ok := r.Members["response_format"]; ok {
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &rf) == nil {
			p.ResponseFormat = rf.Type
		}
	}
	return p
}

// PositiveInteger is the first of the named members that holds a
// positive integer; zero when none does. The members are valid JSON,
// whose integers strconv reads as encoding/json would.
func PositiveInteger(members map[string]json.RawMessage, names ...string) int64 {
	for _, name := range names {
		if raw, ok := members[name]; ok {
			if v, err := strconv.ParseInt(string(jsonscan.TrimSpace(raw)), 10, 64); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

// JSON reports a response_format that asks for JSON.
func (p AnswerParams) JSON() bool {
	return p.ResponseFormat == "json_object" || p.ResponseFormat == "json_schema"
}

// autoMarker is the breakpoint PlaceCacheMarkers places: the default
// five-minute cache.
var autoMarker = json.RawMessage(`{"type":"ephemeral"}`)

// PlaceCacheMarkers places prompt caching breakpoints where a coding
// agent's prompt repeats, for a model whose operator turned automatic
// caching on, when the client placed none (a client's markers are its
// own choice, left as they are): after the last tool, after the system
// prompt (its last system or developer message) and after the last
// message, the conversation so far, which the next turn reads from the
// cache. That is three of the four breakpoints Anthropic allows.
func (p *ChatParams) PlaceCacheMarkers() {
	if p.hasMarker() {
		return
	}
	if n := len(p.Tools); n > 0 {
		p.Tools[n-1].CacheControl = autoMarker
	}
	system := -1
	for i, m := range p.Messages {
		if m.Role == "system" || m.Role == "developer" {
			system = i
		}
	}
	if system >= 0 {
		p.Messages[system].CacheControl = autoMarker
	}
	if n := len(p.Messages); n > 0 && n-1 != system {
		p.Messages[n-1].CacheControl = autoMarker
	}
}

// hasMarker reports whether the client marked a tool, a message or a part.
func (p *ChatParams) hasMarker() bool {
	for _, t := range p.Tools {
		if IsMarker(t.CacheControl) {
			return true
		}
	}
	for _, m := range p.Messages {
		if IsMarker(m.CacheControl) {
			return true
		}
		if !bytes.Contains(m.Content, []byte("cache_control")) {
			continue
		}
		var parts []ContentPart
		json.Unmarshal(m.Content, &parts) //nolint:errcheck // text content has no parts
		for _, part := range parts {
			if IsMarker(part.CacheControl) {
				return true
			}
		}
	}
	return false
}
