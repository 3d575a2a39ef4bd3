// Package cohere translates OpenAI chat completions to and from Cohere's v2
// Chat API (POST /v2/chat), JSON and SSE. Cohere v2 messages are close to
// OpenAI's (roles, tool_calls, tool results), so the request mostly keeps
// its shape; the response and its typed stream events (message-start,
// content-delta, tool-call-start/delta, message-end) are translated into
// the OpenAI schema.
package cohere

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/sse"
)

type chat struct {
	report  translate.Output // what the last ResponseBody returned
	target  translate.Target
	req     *api.ChatRequest
	now     func() time.Time
	status  int
	stream  bool
	created int64
	usage   translate.Usage
	dec     sse.Decoder
	id      string
	calls   int
	done    bool
	st      streamState
}

// NewChat returns the chat translator for provider cohere.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	return &chat{target: t, req: req, now: time.Now}
}

// Usage implements translate.Translator.
func (c *chat) Usage() translate.Usage { return c.usage }

// request is the v2 chat request; messages keep the OpenAI shape.
type request struct {
	Model            string            `json:"model"`
	Messages         []json.RawMessage `json:"messages"`
	Stream           bool              `json:"stream"`
	MaxTokens        *int64            `json:"max_tokens,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	P                *float64          `json:"p,omitempty"`
	StopSequences    []string          `json:"stop_sequences,omitempty"`
	FrequencyPenalty *float64          `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64          `json:"presence_penalty,omitempty"`
	Seed             *int64            `json:"seed,omitempty"`
	Tools            json.RawMessage   `json:"tools,omitempty"`
	ToolChoice       string            `json:"tool_choice,omitempty"`
	ResponseFormat   json.RawMessage   `json:"response_format,omitempty"`
	Thinking         map[string]any    `json:"thinking,omitempty"`
}

type chatIn struct {
	Messages            []map[string]json.RawMessage `json:"messages"`
	MaxTokens           *int64                       `json:"max_tokens"`
	MaxCompletionTokens *int64                       `json:"max_completion_tokens"`
	Temperature         *float64                     `json:"temperature"`
	TopP                *float64                     `json:"top_p"`
	Stop                json.RawMessage              `json:"stop"`
	N                   *int64                       `json:"n"`
	FrequencyPenalty    *float64                     `json:"frequency_penalty"`
	PresencePenalty     *float64                     `json:"presence_penalty"`
	Seed                *int64                       `json:"seed"`
	Tools               json.RawMessage              `json:"tools"`
	ToolChoice          json.RawMessage              `json:"tool_choice"`
	ReasoningEffort     string                       `json:"reasoning_effort"`
	ResponseFormat      *api.ResponseFormat          `json:"response_format"`
}

// RequestBody builds the v2 chat request.
func (c *chat) RequestBody() (translate.Upstream, error) {
	var in chatIn
	if err := c.req.Decode(&in); err != nil {
		return translate.Upstream{}, err
	}
	r, err := c.build(in)
	if err != nil {
		return translate.Upstream{}, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return translate.Upstream{}, err
	}
	headers := []translate.Header{{Name: "content-type", Value: "application/json"}}
	if c.target.APIKey != "" {
		headers = append(headers, translate.Header{Name: "authorization", Value: "Bearer " + c.target.APIKey})
	}
	return translate.Upstream{Body: body, Path: c.target.BasePath + "/v2/chat", Headers: headers}, nil
}

func (c *chat) build(in chatIn) (*request, error) {
	if in.N != nil && *in.N > 1 {
		return nil, api.Invalid("n", "Cohere models return one choice; 'n' must be 1.")
	}
	r := &request{Model: c.target.Model, Stream: c.req.Stream, MaxTokens: in.MaxCompletionTokens, Temperature: in.Temperature,
		P: in.TopP, FrequencyPenalty: in.FrequencyPenalty, PresencePenalty: in.PresencePenalty, Seed: in.Seed, Tools: in.Tools}
	if r.MaxTokens == nil {
		r.MaxTokens = in.MaxTokens
	}
	strip := api.Strip{ThinkingBlocks: true, ReasoningContent: true, CacheControl: true}
	strip.Messages(in.Messages)
	r.Tools = strip.Tools(r.Tools)
	for _, m := range in.Messages {
		if string(m["role"]) == `"developer"` {
			m["role"] = json.RawMessage(`"system"`)
		}
		delete(m, "name")
		b, _ := json.Marshal(m)
		r.Messages = append(r.Messages, b)
	}
	stop, err := api.StopSequences(in.Stop)
	if err != nil {
		return nil, err
	}
	r.StopSequences = stop
	if r.ToolChoice, err = toolChoice(in.ToolChoice); err != nil {
		return nil, err
	}
	if r.Thinking, err = thinking(in.ReasoningEffort); err != nil {
		return nil, err
	}
	if rf := in.ResponseFormat; rf != nil && rf.Type != "text" {
		format := map[string]any{"type": "json_object"}
		if rf.Type == "json_schema" {
			format["json_schema"] = rf.JSONSchema.Schema
		}
		r.ResponseFormat, _ = json.Marshal(format)
	}
	return r, nil
}

// thinking maps reasoning_effort to Cohere's thinking token budget
// (reasoning models such as command-a-reasoning).
func thinking(effort string) (map[string]any, error) {
	switch effort {
	case "":
		return nil, nil
	case "none":
		return map[string]any{"type": "disabled"}, nil
	}
	budget := map[string]int{"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}[effort]
	if budget == 0 {
		return nil, api.Invalid("reasoning_effort", "Invalid 'reasoning_effort': '%s'.", effort)
	}
	return map[string]any{"type": "enabled", "token_budget": budget}, nil
}

// toolChoice maps tool_choice; Cohere has no "auto" value (it is the
// default) and cannot force one named tool.
func toolChoice(raw json.RawMessage) (string, error) {
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case json.Unmarshal(raw, &s) != nil:
		return "", api.Invalid("tool_choice", "Cohere models cannot be forced to call one named tool; use \"required\".")
	case s == "auto":
		return "", nil
	case s == "required":
		return "REQUIRED", nil
	case s == "none":
		return "NONE", nil
	}
	return "", api.Invalid("tool_choice", "Invalid 'tool_choice': '%s'.", s)
}

// ResponseHeaders streams successful event streams.
func (c *chat) ResponseHeaders(status int, contentType string) translate.Head {
	c.status, c.created = status, c.now().Unix()
	c.st.head = nil // the chunks' head holds the time
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case status/100 == 2 && mt == "text/event-stream":
		c.stream = true
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return translate.Head{Status: http.StatusBadGateway, ContentType: "application/json"}
	}
	return translate.Head{Status: status, ContentType: "application/json"}
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

// responseBody translates the response, an error or a stream chunk.
func (c *chat) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	switch {
	case c.stream:
		return c.streamChunk(chunk, endOfStream), nil
	case c.status/100 != 2:
		return errorBody(c.status, chunk), nil
	}
	return c.completion(chunk)
}

// errorBody normalizes {"id","message"}; a rejected credential is the
// gateway's problem and its message is not passed on.
func errorBody(status int, body []byte) []byte {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil || e.Message == "" {
		return api.NormalizeError(status, body)
	}
	msg := e.Message
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		msg = "The provider rejected the gateway's credentials for this backend."
		status = http.StatusBadGateway
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
	return api.NormalizeError(status, b)
}

// usageIn is Cohere's usage: the tokens the model read and wrote (not the
// billed units, which leave out Cohere's own preamble), and the prompt
// tokens that hit Cohere's inference cache, a number that the API
// reference types as a double.
type usageIn struct {
	Tokens struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"tokens"`
	CachedTokens float64 `json:"cached_tokens"`
}

func (u usageIn) normalize() translate.Usage {
	in, out := u.Tokens.InputTokens, u.Tokens.OutputTokens
	cached := min(max(int64(u.CachedTokens), 0), in)
	return translate.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out, CachedTokens: cached}
}

func finishReason(r string) string {
	switch strings.ToUpper(r) {
	case "MAX_TOKENS":
		return "length"
	case "TOOL_CALL":
		return "tool_calls"
	}
	return "stop" // COMPLETE, STOP_SEQUENCE, ERROR, TIMEOUT
}

// completion turns a v2 chat response into a chat.completion. A body
// that is none (not a JSON object, no id, content parts or tool calls
// that are not objects) is an error wrapping translate.ErrUpstream.
func (c *chat) completion(body []byte) ([]byte, error) {
	var r struct {
		ID           string `json:"id"`
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content []*struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			ToolCalls []*api.ToolCall `json:"tool_calls"`
		} `json:"message"`
		Usage usageIn `json:"usage"`
	}
	if err := api.DecodeUpstream(body, &r, "chat response"); err != nil {
		return nil, err
	}
	if r.ID == "" {
		return nil, api.Unusable("the provider's chat response has no id")
	}
	for _, tc := range r.Message.ToolCalls {
		if tc == nil {
			return nil, api.Unusable("the provider's chat response has a tool call that is not an object")
		}
	}
	c.usage = r.Usage.normalize()
	var text strings.Builder
	for _, p := range r.Message.Content {
		if p == nil {
			return nil, api.Unusable("the provider's chat response has a content part that is not an object")
		}
		if p.Type == "text" {
			text.WriteString(p.Text)
		}
	}
	msg := api.Message{Role: "assistant"}
	for _, tc := range r.Message.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, api.NewToolCall(nil, tc.ID, tc.Function.Name, tc.Function.Arguments))
	}
	msg.SetText(text.String(), "")
	cc := api.NewChatCompletion(r.ID, c.req.Model, c.created) // the client's model, not Cohere's id
	cc.Choices[0].Message, cc.Choices[0].FinishReason, cc.Usage = msg, finishReason(r.FinishReason), api.ChatUsage(c.usage)
	out, err := json.Marshal(cc)
	return out, api.AsUnusable(err)
}

var _ translate.Reporter = (*chat)(nil)
