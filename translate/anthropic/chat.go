package anthropic

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/sse"
)

// chat is the translator for one exchange.
type chat struct {
	report  translate.Output // what the last ResponseBody returned
	target  translate.Target
	req     *api.ChatRequest
	now     func() time.Time
	status  int
	stream  bool
	usage   translate.Usage
	dec     sse.Decoder
	st      streamState
	created int64
	// jsonMode: a JSON response_format is answered by the json_response
	// tool, whose input becomes the message content.
	jsonMode bool
	// opts are what the target allows the request.
	opts buildOptions
	// maxTokens is the max_tokens sent.
	maxTokens int64
}

// NewChat returns the chat translator for provider anthropic. What the
// request asks of the answer (a JSON response_format answered natively
// where the model has structured outputs, else by a tool; the max_tokens
// sent) is settled here, so RequestBody changes nothing.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	return newTranslator(t, req, StructuredOutputs(t.Model))
}

// NewChatToolJSON is NewChat answering every JSON response_format through
// a forced tool, whatever the model: for a platform that does not take
// output_config by default (Vertex AI: an organization policy must allow
// structured outputs).
func NewChatToolJSON(t translate.Target, req *api.ChatRequest) translate.Translator {
	return newTranslator(t, req, false)
}

func newTranslator(t translate.Target, req *api.ChatRequest, native bool) *chat {
	p := req.AnswerParams()
	return &chat{target: t, req: req, now: time.Now, jsonMode: p.JSON(), opts: buildOptions{native: native, webSearch: t.WebSearch, autoCache: t.AutoCache},
		maxTokens: sentMaxTokens(p.MaxTokens, p.ReasoningEffort)}
}

// MaxOutputTokens implements translate.OutputBound: max_tokens is
// required, and sent with DefaultMaxTokens when the client sets no bound.
func (c *chat) MaxOutputTokens() int64 { return c.maxTokens }

// RequestBody builds the Messages API request.
func (c *chat) RequestBody() (translate.Upstream, error) {
	r, err := buildRequest(c.target.Model, c.req, c.opts)
	if err != nil {
		return translate.Upstream{}, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return translate.Upstream{}, err
	}
	headers := []translate.Header{{Name: "content-type", Value: "application/json"}, {Name: "anthropic-version", Value: Version}}
	if c.target.APIKey != "" {
		headers = append(headers, translate.Header{Name: "x-api-key", Value: c.target.APIKey})
	}
	return translate.Upstream{Body: body, Path: c.target.BasePath + "/v1/messages", Headers: headers}, nil
}

// ResponseHeaders streams successful event streams and maps error statuses.
func (c *chat) ResponseHeaders(status int, contentType string) translate.Head {
	c.status = status
	c.created = c.now().Unix()
	mt, _, _ := mime.ParseMediaType(contentType)
	if status/100 == 2 && mt == "text/event-stream" {
		c.stream = true
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	}
	if status/100 == 2 {
		return translate.Head{Status: status, ContentType: "application/json"}
	}
	return translate.Head{Status: clientStatus(status), ContentType: "application/json"}
}

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (c *chat) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := c.responseBody(chunk, endOfStream)
	c.report.Later(translate.Chat, out, c.status, c.stream)
	return out, err
}

// Output implements translate.Reporter.
func (c *chat) Output() *translate.Output { return c.report.Scanned() }

// responseBody translates the message, an error, or a stream chunk.
func (c *chat) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	switch {
	case c.stream:
		return c.streamChunk(chunk, endOfStream), nil
	case c.status/100 != 2:
		return errorBody(c.status, chunk), nil
	}
	return c.completion(chunk)
}

// Usage implements translate.Translator.
func (c *chat) Usage() translate.Usage { return c.usage }

// usageIn is Anthropic's usage.
type usageIn struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	// CacheCreation splits the cache writes by their ttl.
	CacheCreation *struct {
		Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	// ServerToolUse counts the server tools' uses Anthropic bills apart:
	// web searches ($10 per 1,000).
	ServerToolUse *struct {
		WebSearchRequests int64 `json:"web_search_requests"`
	} `json:"server_tool_use"`
}

// normalize counts cached and cache-writing input as prompt tokens, as
// OpenAI's prompt_tokens includes cached tokens.
func (u usageIn) normalize() translate.Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	out := translate.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	if u.CacheCreation != nil {
		out.CacheWrite1hTokens = min(u.CacheCreation.Ephemeral1hInputTokens, u.CacheCreationInputTokens)
	}
	if u.ServerToolUse != nil {
		out.WebSearchRequests = max(u.ServerToolUse.WebSearchRequests, 0)
	}
	return out
}

// after is the usage of a stream once its message_delta reported d:
// d's counts are cumulative, and input counts it leaves out (older API
// versions report output tokens only), the split of cache writes by ttl
// (which message_delta never has) and the web searches (when it has no
// server_tool_use) keep message_start's (start).
func (d usageIn) after(start translate.Usage) translate.Usage {
	if d.InputTokens == 0 && d.CacheReadInputTokens == 0 && d.CacheCreationInputTokens == 0 {
		d.InputTokens = start.PromptTokens - start.CachedTokens - start.CacheWriteTokens
		d.CacheReadInputTokens, d.CacheCreationInputTokens = start.CachedTokens, start.CacheWriteTokens
	}
	u := d.normalize()
	if d.CacheCreation == nil {
		u.CacheWrite1hTokens = min(start.CacheWrite1hTokens, u.CacheWriteTokens)
	}
	if d.ServerToolUse == nil {
		u.WebSearchRequests = start.WebSearchRequests
	}
	return u
}

// finishReason maps stop_reason; a call of the JSON answer's tool alone
// is a normal stop. called says whether the client's tools were called.
func (c *chat) finishReason(stop string, called bool) string {
	if c.jsonMode && stop == "tool_use" && !called {
		return "stop"
	}
	return finishReason(stop)
}

// finishReason maps stop_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

type contentBlockIn struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	// Citations are a text block's sources: for web search results, the
	// page's URL and title.
	Citations []struct {
		Type  string `json:"type"`
		URL   string `json:"url"`
		Title string `json:"title"`
	} `json:"citations"`
}

// completion turns a Message into a chat.completion. A body that is no
// Message (not a JSON object, no id, content not an array of blocks) is an
// error wrapping translate.ErrUpstream.
func (c *chat) completion(body []byte) ([]byte, error) {
	var m struct {
		ID      string            `json:"id"`
		Content []*contentBlockIn `json:"content"`
		Stop    string            `json:"stop_reason"`
		Usage   usageIn           `json:"usage"`
	}
	if err := api.DecodeUpstream(body, &m, "message"); err != nil {
		return nil, err
	}
	if m.ID == "" || m.Content == nil {
		return nil, api.Unusable("the provider's message has no id or no content")
	}
	c.usage = m.Usage.normalize()
	msg := api.Message{Role: "assistant"}
	var text, reasoning strings.Builder
	for _, b := range m.Content {
		if b == nil {
			return nil, api.Unusable("the provider's message has a content block that is not an object")
		}
		switch b.Type {
		case "text":
			start := utf8.RuneCountInString(text.String()) // blocks are few: counting again is cheap
			text.WriteString(b.Text)
			for _, cite := range b.Citations {
				if cite.Type == "web_search_result_location" && cite.URL != "" {
					msg.Annotations = append(msg.Annotations, api.URLCitation(start, start+utf8.RuneCountInString(b.Text), cite.URL, cite.Title))
				}
			}
		case "thinking":
			reasoning.WriteString(b.Thinking)
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "thinking", Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "redacted_thinking", Data: b.Data})
		case "tool_use":
			if c.jsonMode && b.Name == jsonTool {
				text.WriteString(compactJSON(b.Input))
				continue
			}
			msg.ToolCalls = append(msg.ToolCalls, api.NewToolCall(nil, b.ID, b.Name, compactJSON(b.Input)))
		}
	}
	msg.SetText(text.String(), reasoning.String())
	cc := api.NewChatCompletion(m.ID, c.req.Model, c.created) // the client's model, not Anthropic's id
	cc.Choices[0].Message, cc.Choices[0].FinishReason, cc.Usage = msg, c.finishReason(m.Stop, len(msg.ToolCalls) > 0), api.ChatUsage(c.usage)
	out, err := json.Marshal(cc)
	return out, api.AsUnusable(err)
}

// compactJSON renders a tool input as OpenAI's arguments string.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// clientStatus maps Anthropic's statuses: overloaded (529) is a 503, and
// the provider refusing the gateway's own credential is the gateway's
// failure (502), never the client's 401.
func clientStatus(status int) int {
	switch status {
	case 529:
		return http.StatusServiceUnavailable
	case http.StatusUnauthorized, http.StatusForbidden:
		return http.StatusBadGateway
	}
	return status
}

// errorBody normalizes {"type":"error","error":{"type","message"}}.
func errorBody(status int, body []byte) []byte {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return api.NormalizeError(clientStatus(status), body)
	}
	typ, msg := errorType(e.Error.Type), api.ProviderMessage(clientStatus(status), e.Error.Message)
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		msg = "The provider rejected the gateway's credentials for this backend."
	}
	return api.MarshalError(api.ErrorObject{Message: msg, Type: typ, Code: api.Nullable(e.Error.Type)})
}

func errorType(anthropicType string) string {
	switch anthropicType {
	case "invalid_request_error", "not_found_error", "request_too_large":
		return "invalid_request_error"
	case "rate_limit_error":
		return "rate_limit_error"
	}
	return "server_error" // api_error, overloaded_error, authentication_error, permission_error
}

var _ translate.Reporter = (*chat)(nil)
