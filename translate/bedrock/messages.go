package bedrock

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
)

// AnthropicVersion is the anthropic_version Bedrock's InvokeModel takes
// for Claude.
const AnthropicVersion = "bedrock-2023-05-31"

// messagesInvoke relays a Messages API request to Claude on Bedrock's
// InvokeModel (invoke-with-response-stream for a stream), which takes the
// Messages API's body: the client's members as sent but for model (in
// the path) and stream (in the operation), with Bedrock's
// anthropic_version, and anthropic-beta as the body's anthropic_beta. A
// message comes back as Anthropic's; a stream's events come in
// event-stream chunk frames (base64 JSON), which become the Messages
// API's SSE events again. Both name the client's model
// (anthropic.WithClientModel).
type messagesInvoke struct {
	report translate.Output // what the last ResponseBody returned
	target translate.Target
	req    *api.MessagesRequest
	now    func() time.Time
	status int
	stream bool
	dec    Decoder
	usage  anthropic.MessagesUsage
	ended  bool
}

// NewMessages returns the translator of a Messages request to Claude on
// Bedrock, or nil for another model, which gets it through Converse.
func NewMessages(t translate.Target, r *api.MessagesRequest) translate.Translator {
	if !strings.Contains(t.Model, "anthropic.claude") {
		return nil
	}
	return &messagesInvoke{target: t, req: r, now: time.Now}
}

// RequestBody implements translate.Translator.
func (m *messagesInvoke) RequestBody() (translate.Upstream, error) {
	members := make(map[string]json.RawMessage, len(m.req.Members)+1)
	for k, v := range m.req.Members {
		members[k] = v
	}
	delete(members, "model")
	delete(members, "stream")
	members["anthropic_version"] = json.RawMessage(`"` + AnthropicVersion + `"`)
	var asked []string // the body's betas, else the header's
	if json.Unmarshal(members["anthropic_beta"], &asked) != nil || len(asked) == 0 {
		asked = strings.Split(m.req.Beta, ",")
	}
	var betas []string
	for _, b := range asked {
		switch b = strings.TrimSpace(b); {
		case slices.Contains(bedrockBetas, b):
			betas = append(betas, b)
		case b != "":
			for prefix, member := range betaMembers {
				if strings.HasPrefix(b, prefix) {
					delete(members, member)
				}
			}
		}
	}
	delete(members, "anthropic_beta")
	if len(betas) > 0 {
		members["anthropic_beta"], _ = json.Marshal(betas)
	}
	body, err := json.Marshal(members)
	if err != nil {
		return translate.Upstream{}, err
	}
	op := "invoke"
	if m.req.Stream {
		op = "invoke-with-response-stream"
	}
	return upstream(m.target, op, body, m.now()), nil
}

// MaxOutputTokens implements translate.OutputBound.
func (m *messagesInvoke) MaxOutputTokens() int64 { return m.req.MaxTokens }

// ResponseHeaders implements translate.Translator.
func (m *messagesInvoke) ResponseHeaders(status int, contentType string) translate.Head {
	mt, _, _ := mime.ParseMediaType(contentType)
	m.status = status
	m.stream = status/100 == 2 && mt == "application/vnd.amazon.eventstream"
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		status = http.StatusBadGateway
	}
	if m.stream {
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	}
	return translate.Head{Status: clientStatus(status), ContentType: "application/json"}
}

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (m *messagesInvoke) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := m.responseBody(chunk, endOfStream)
	m.report.Later(translate.Messages, out, m.status, m.stream)
	return out, err
}

// Output implements translate.Reporter.
func (m *messagesInvoke) Output() *translate.Output { return m.report.Scanned() }

// responseBody implements translate.Translator.
func (m *messagesInvoke) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if !m.stream {
		if m.status/100 != 2 {
			return m.errorBody(chunk), nil
		}
		if !m.usage.Message(chunk) {
			return nil, api.Unusable("the provider's message is not JSON")
		}
		return anthropic.WithClientModel(chunk, m.req.Model), nil
	}
	var out []byte
	err := m.dec.each(chunk, func(f rawFrame) {
		if !m.ended {
			out = m.frame(out, f)
		}
	})
	if err != nil && !m.ended {
		m.ended = true
		out = api.MessagesErrorEvent(out, "api_error", "The provider's event stream is corrupt.")
	}
	if endOfStream {
		m.usage.EndStream()
	}
	if endOfStream && !m.ended {
		m.ended = true
		out = api.MessagesErrorEvent(out, "api_error", "The provider's stream ended before it was complete.")
	}
	return out, nil
}

// frame turns a chunk frame into its Messages API event, and an exception
// into an error event.
func (m *messagesInvoke) frame(out []byte, f rawFrame) []byte {
	var payload struct {
		Bytes   string `json:"bytes"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(f.payload, &payload); err != nil {
		m.ended = true
		return api.MessagesErrorEvent(out, "api_error", "The provider sent an event that is not JSON.")
	}
	if string(f.header(":message-type")) == "exception" {
		m.ended = true
		typ := "api_error"
		switch string(f.header(":exception-type")) {
		case "throttlingException":
			typ = "rate_limit_error"
		case "validationException":
			typ = "invalid_request_error"
		case "serviceUnavailableException", "modelNotReadyException":
			typ = "overloaded_error"
		}
		return api.MessagesErrorEvent(out, typ, payload.Message)
	}
	if string(f.header(":event-type")) != "chunk" {
		return out
	}
	data, err := base64.StdEncoding.DecodeString(payload.Bytes)
	if err != nil {
		m.ended = true
		return api.MessagesErrorEvent(out, "api_error", "The provider sent a chunk that is not base64.")
	}
	var ev map[string]json.RawMessage
	if json.Unmarshal(data, &ev) != nil {
		m.ended = true
		return api.MessagesErrorEvent(out, "api_error", "The provider sent an event that is not JSON.")
	}
	var typ string
	json.Unmarshal(ev["type"], &typ) //nolint:errcheck // an event without a type is named ""
	if _, ok := ev[invocationMetrics]; ok {
		delete(ev, invocationMetrics) // Bedrock's own, not the Messages API's
		data, _ = json.Marshal(ev)
	}
	if typ == "message_start" {
		if echoed, _ := anthropic.StartWithClientModel(data, m.req.Model); echoed != nil {
			data = echoed
		}
	}
	m.usage.Event(data)
	m.ended = m.usage.Ended()
	out = append(out, "event: "...)
	out = append(out, typ...)
	out = append(out, "\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

// bedrockBetas are the betas Bedrock's InvokeModel takes for Claude, as
// AWS documents them. Bedrock refuses any other ("invalid beta flag"), and
// clients send others (Claude Code's claude-code-20250219, MCP servers),
// so those are left out, with the body members that go with them
// (betaMembers).
var bedrockBetas = []string{"computer-use-2024-10-22", "computer-use-2025-01-24", "token-efficient-tools-2025-02-19",
	"interleaved-thinking-2025-05-14", "output-128k-2025-02-19", "dev-full-thinking-2025-05-14", "context-1m-2025-08-07",
	"context-management-2025-06-27", "effort-2025-11-24", "tool-search-tool-2025-10-19", "tool-examples-2025-10-29"}

// betaMembers are the body members of the betas Bedrock does not take, by
// the betas' prefix.
var betaMembers = map[string]string{"mcp-servers-": "mcp_servers", "structured-outputs-": "output_format"}

// invocationMetrics is the member Bedrock adds to a stream's message_stop.
const invocationMetrics = "amazon-bedrock-invocationMetrics"

// errorBody is a Bedrock error ({"message"}) as the Messages API's.
func (m *messagesInvoke) errorBody(body []byte) []byte {
	var e struct {
		Message string `json:"message"`
	}
	msg := "The provider answered with an error."
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	status := clientStatus(m.status)
	if m.status == http.StatusUnauthorized || m.status == http.StatusForbidden {
		status, msg = http.StatusBadGateway, "The provider rejected the gateway's credentials for this backend."
	}
	return api.MessagesError(api.MessagesErrorType(status), msg)
}

// Usage implements translate.Translator.
func (m *messagesInvoke) Usage() translate.Usage { return m.usage.Usage() }

// FailStream implements translate.StreamFailer.
func (m *messagesInvoke) FailStream(message, _ string) []byte {
	if !m.stream || m.ended {
		return nil
	}
	m.ended = true
	return api.MessagesErrorEvent(nil, "api_error", message)
}

// countTokens asks Bedrock's CountTokens for the count of a Messages
// request to Claude: the InvokeModel body it would send, base64 in
// input.invokeModel.body, for the model's foundation id (CountTokens
// refuses cross-region inference profiles: us.anthropic.… is counted as
// anthropic.…). InvokeModel's body requires max_tokens, which a
// count_tokens request has none of: it gets 1, on which the input
// tokens do not depend.
// Bedrock's {"inputTokens"} comes back as the Messages API's
// {"input_tokens"}.
type countTokens struct {
	translate.NoText // generates no text
	invoke           *messagesInvoke
	status           int
	counted          int64
}

// NewCountTokens returns the translator of a count_tokens request to
// Claude on Bedrock; nil for another model, which the gateway estimates.
func NewCountTokens(t translate.Target, r *api.MessagesRequest) translate.Translator {
	if !CountsTokens(t.Model) {
		return nil
	}
	if _, ok := r.Members["max_tokens"]; !ok {
		counted := *r
		counted.Members = make(map[string]json.RawMessage, len(r.Members)+1)
		for k, v := range r.Members {
			counted.Members[k] = v
		}
		counted.Members["max_tokens"] = json.RawMessage("1")
		r = &counted
	}
	return &countTokens{invoke: &messagesInvoke{target: t, req: r, now: time.Now}}
}

// RequestBody implements translate.Translator.
func (c *countTokens) RequestBody() (translate.Upstream, error) {
	up, err := c.invoke.RequestBody()
	if err != nil {
		return up, err
	}
	body, err := json.Marshal(map[string]any{"input": map[string]any{"invokeModel": map[string]any{"body": up.Body}}})
	if err != nil {
		return translate.Upstream{}, err
	}
	t := c.invoke.target
	if i := strings.Index(t.Model, "anthropic."); i > 0 && !strings.HasPrefix(t.Model, "arn:") {
		t.Model = t.Model[i:]
	}
	return upstream(t, "count-tokens", body, c.invoke.now()), nil
}

// ResponseHeaders implements translate.Translator.
func (c *countTokens) ResponseHeaders(status int, contentType string) translate.Head {
	c.status = status
	return c.invoke.ResponseHeaders(status, contentType)
}

// ResponseBody implements translate.Translator.
func (c *countTokens) ResponseBody(chunk []byte, _ bool) ([]byte, error) {
	if c.status/100 != 2 {
		return c.invoke.errorBody(chunk), nil
	}
	var n struct {
		InputTokens *int64 `json:"inputTokens"`
	}
	if json.Unmarshal(chunk, &n) != nil || n.InputTokens == nil || *n.InputTokens < 0 {
		return nil, api.Unusable("the provider's token count is not CountTokens' answer")
	}
	c.counted = *n.InputTokens
	return fmt.Appendf(nil, `{"input_tokens":%d}`, *n.InputTokens), nil
}

// Usage implements translate.Translator: the tokens counted, which token
// limits are charged (a count is free of charge).
func (c *countTokens) Usage() translate.Usage {
	return translate.Usage{PromptTokens: c.counted, TotalTokens: c.counted}
}

var _ translate.Reporter = (*messagesInvoke)(nil)

var _ translate.Reporter = (*countTokens)(nil)

// CountsTokens reports whether Bedrock counts a Messages request's tokens
// for the model itself: CountTokens serves Claude alone.
func CountsTokens(model string) bool { return strings.Contains(model, "anthropic.claude") }
