package anthropic

import (
	"encoding/json"
	"mime"
	"net/http"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
)

// DefaultVersion is the anthropic-version a request goes with when the
// client sent none.
const DefaultVersion = "2023-06-01"

// messages relays a Messages API request (POST /v1/messages, or its
// count_tokens) to Anthropic as the client sent it: the body byte for
// byte but for the upstream model, anthropic-version and anthropic-beta
// as sent (never an allowlist: a beta the gateway does not know is the
// client's to use), and the provider's key in place of the client's.
// The answer goes back as it came, stream events too; the gateway only
// reads its usage.
type messages struct {
	target translate.Target
	req    *api.MessagesRequest
	path   string
	stream bool
	dec    sse.Decoder
	usage  translate.Usage
	ended  bool // message_stop or an error event was relayed
	failed bool // the answer is an error
}

// NewMessages returns the translator of a POST /v1/messages exchange with
// Anthropic.
func NewMessages(t translate.Target, r *api.MessagesRequest) translate.Translator {
	return &messages{target: t, req: r, path: "/v1/messages"}
}

// NewCountTokens returns the translator of a POST
// /v1/messages/count_tokens exchange with Anthropic, whose own count is
// exact.
func NewCountTokens(t translate.Target, r *api.MessagesRequest) translate.Translator {
	return &messages{target: t, req: r, path: "/v1/messages/count_tokens"}
}

// RequestBody implements translate.Translator.
func (m *messages) RequestBody() (translate.Upstream, error) {
	body, err := WithModel(m.req, m.target.Model)
	if err != nil {
		return translate.Upstream{}, err
	}
	version := m.req.Version
	if version == "" {
		version = DefaultVersion
	}
	up := translate.Upstream{Body: body, Path: m.target.BasePath + m.path, Headers: []translate.Header{
		{Name: "content-type", Value: "application/json"}, {Name: "anthropic-version", Value: version}}}
	if m.req.Beta != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "anthropic-beta", Value: m.req.Beta})
	}
	if m.target.APIKey != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "x-api-key", Value: m.target.APIKey})
	}
	return up, nil
}

// WithModel is the client's body with model as its model: an edit of the
// body as sent where it has one model member, else the members encoded
// anew.
func WithModel(r *api.MessagesRequest, model string) ([]byte, error) {
	quoted := jsonscan.AppendQuoted(nil, model)
	if at := r.ModelAt; at.End > 0 {
		out := make([]byte, 0, len(r.Body)+len(quoted))
		out = append(out, r.Body[:at.VS]...)
		out = append(out, quoted...)
		return append(out, r.Body[at.VS+len(at.Value):]...), nil
	}
	members := make(map[string]json.RawMessage, len(r.Members))
	for k, v := range r.Members {
		members[k] = v
	}
	members["model"] = quoted
	return json.Marshal(members)
}

// MaxOutputTokens implements translate.OutputBound.
func (m *messages) MaxOutputTokens() int64 { return m.req.MaxTokens }

// ResponseHeaders implements translate.Translator. A refusal of the
// gateway's own credentials is the gateway's failure, not the client's:
// it becomes a 502.
func (m *messages) ResponseHeaders(status int, contentType string) translate.Head {
	mt, _, _ := mime.ParseMediaType(contentType)
	m.stream = status/100 == 2 && mt == "text/event-stream"
	m.failed = status/100 != 2
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		status = http.StatusBadGateway
	}
	if contentType == "" {
		contentType = "application/json"
	}
	return translate.Head{Status: status, ContentType: contentType, Stream: m.stream}
}

// ResponseBody relays the answer, reading its usage.
func (m *messages) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if !m.stream {
		if m.failed {
			return messagesError(chunk), nil
		}
		var msg struct {
			Usage       *usageIn `json:"usage"`
			InputTokens *int64   `json:"input_tokens"` // count_tokens
		}
		if json.Unmarshal(chunk, &msg) != nil {
			return nil, api.Unusable("the provider's message is not JSON")
		}
		if msg.Usage != nil {
			m.usage = msg.Usage.normalize()
		}
		return chunk, nil
	}
	for _, ev := range m.dec.Feed(chunk) {
		m.event(ev.Data)
	}
	return chunk, nil
}

// event reads the usage of message_start and message_delta; message_stop
// and error end the stream.
func (m *messages) event(data []byte) {
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			Usage *usageIn `json:"usage"`
		} `json:"message"`
		Usage *usageIn `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		if ev.Message.Usage != nil {
			m.usage = ev.Message.Usage.normalize()
		}
	case "message_delta":
		if ev.Usage == nil {
			return
		}
		u := *ev.Usage
		if u.InputTokens == 0 && u.CacheReadInputTokens == 0 && u.CacheCreationInputTokens == 0 {
			u.InputTokens = m.usage.PromptTokens - m.usage.CachedTokens - m.usage.CacheWriteTokens
			u.CacheReadInputTokens, u.CacheCreationInputTokens = m.usage.CachedTokens, m.usage.CacheWriteTokens
		}
		hour := m.usage.CacheWrite1hTokens
		m.usage = u.normalize()
		if u.CacheCreation == nil {
			m.usage.CacheWrite1hTokens = min(hour, m.usage.CacheWriteTokens)
		}
	case "message_stop", "error":
		m.ended = true
	}
}

// Usage implements translate.Translator.
func (m *messages) Usage() translate.Usage { return m.usage }

// FailStream implements translate.StreamFailer: the Messages API's error
// event.
func (m *messages) FailStream(message, _ string) []byte {
	if !m.stream || m.ended {
		return nil
	}
	m.ended = true
	return MessagesErrorEvent("api_error", message)
}

// MessagesErrorEvent is the Messages API's stream error event.
func MessagesErrorEvent(typ, message string) []byte {
	b, _ := json.Marshal(messagesErrorBody(typ, message))
	return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
}

type messagesErrorJSON struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func messagesErrorBody(typ, message string) messagesErrorJSON {
	e := messagesErrorJSON{Type: "error"}
	e.Error.Type, e.Error.Message = typ, message
	return e
}

// messagesError is a provider's error as the client gets it: Anthropic's
// as it came, but a refusal of the gateway's credentials, which is told
// as the gateway's failure; a body that is no Anthropic error becomes
// one.
func messagesError(body []byte) []byte {
	var e messagesErrorJSON
	if json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Message == "" {
		e = messagesErrorBody("api_error", "The provider answered with an error the gateway could not read.")
	}
	switch e.Error.Type {
	case "authentication_error", "permission_error":
		e = messagesErrorBody("api_error", "The provider rejected the gateway's credentials for this backend.")
	default:
		return body
	}
	b, _ := json.Marshal(e)
	return b
}
