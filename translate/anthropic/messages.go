package anthropic

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"slices"

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
// The answer goes back as it came, stream events too, but for its model
// (WithClientModel); the gateway only reads its usage.
type messages struct {
	report translate.Output // what the last ResponseBody returned
	status int
	target translate.Target
	req    *api.MessagesRequest
	path   string
	stream bool
	dec    sse.Decoder
	whole  sse.Whole // the relayed stream, in whole events
	usage  MessagesUsage
	// started: the stream's message_start was decoded; start and
	// echoed are its data as it came and with the client's model, until
	// the relayed bytes, which may come a chunk later, hold it. Data that
	// a provider spread over several lines, which Anthropic never does, is
	// left as it came.
	started       bool
	start, echoed []byte
	failed        bool // the answer is an error
	// count: a count_tokens exchange, whose usage is the tokens counted.
	count bool
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
	return &messages{target: t, req: r, path: "/v1/messages/count_tokens", count: true}
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
	m.status = status
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

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (m *messages) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := m.responseBody(chunk, endOfStream)
	m.report.Later(translate.Messages, out, m.status, m.stream)
	return out, err
}

// Output implements translate.Reporter.
func (m *messages) Output() *translate.Output { return m.report.Scanned() }

// responseBody relays the answer, reading its usage.
func (m *messages) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if !m.stream {
		if m.failed {
			return messagesError(chunk), nil
		}
		if m.count {
			return chunk, m.usage.Count(chunk)
		}
		if !m.usage.Message(chunk) {
			return nil, api.Unusable("the provider's message is not JSON")
		}
		return WithClientModel(chunk, m.req.Model), nil
	}
	for _, ev := range m.dec.Feed(chunk) {
		switch ev.Type {
		case "content_block_start", "content_block_delta", "content_block_stop", "ping":
			// most of a stream, with no usage: not decoded
		default:
			m.usage.Event(ev.Data)
			if !m.started {
				var echoed []byte
				if echoed, m.started = StartWithClientModel(ev.Data, m.req.Model); echoed != nil && bytes.IndexByte(ev.Data, '\n') < 0 {
					m.start, m.echoed = bytes.Clone(ev.Data), echoed
				}
			}
		}
	}
	out := m.whole.Cut(chunk, endOfStream)
	if m.echoed != nil {
		out = m.replaceStart(out)
	}
	if !endOfStream {
		return out, nil
	}
	m.usage.EndStream()
	if m.usage.Ended() {
		return out, nil
	}
	// The stream broke off before message_stop: it ends with the error
	// event the Messages API's clients raise, after what was sent of an
	// event, ended so that the error event is one.
	m.usage.ended = true
	out = slices.Clip(out)
	if m.dec.Pending() {
		out = append(out, "\n\n"...)
	}
	return api.MessagesErrorEvent(out, "api_error", "The provider's stream ended before it was complete."), nil
}

// WithClientModel is a message, valid JSON (as MessagesUsage.Message
// found it), with model, the one the client asked for, whatever id the
// provider answered with: clients compare the two (Claude Code drops the
// signed thinking of a message of another model). Every other byte stays
// as it came; msg itself is returned when it names model already, names
// none, or is no JSON object.
func WithClientModel(msg []byte, model string) []byte {
	out, _ := jsonscan.SetString(msg, jsonscan.SkipSpace(msg, 0), "model", model)
	return out
}

// StartWithClientModel reads a stream event's data, valid JSON or not: it
// reports whether the event is message_start and, if its message names
// another model than model, the client's, returns the data with model
// (as WithClientModel), else nil.
func StartWithClientModel(data []byte, model string) (out []byte, start bool) {
	var scratch [8]jsonscan.Member
	members, ok := jsonscan.ValidMembers(data, scratch[:0])
	if !ok {
		return nil, false
	}
	var msg jsonscan.Member
	for _, m := range members {
		switch string(m.Key) {
		case "type":
			start = jsonscan.IsText(m.Value, "message_start")
		case "message":
			msg = m
		}
	}
	if !start || jsonscan.Kind(msg.Value) != jsonscan.Object {
		return nil, start
	}
	if out, changed := jsonscan.SetString(data, msg.VS, "model", model); changed {
		return out, true
	}
	return nil, true
}

// replaceStart is out, relayed whole events, with message_start's data
// as echoed once they hold it: a new slice, as out may be the caller's
// chunk.
func (m *messages) replaceStart(out []byte) []byte {
	i := bytes.Index(out, m.start)
	if i < 0 {
		return out // a chunk later: sse.Whole knows fewer blank lines than the decoder
	}
	b := make([]byte, 0, len(out)-len(m.start)+len(m.echoed))
	b = append(append(append(b, out[:i]...), m.echoed...), out[i+len(m.start):]...)
	m.start, m.echoed = nil, nil
	return b
}

// Usage implements translate.Translator.
func (m *messages) Usage() translate.Usage { return m.usage.Usage() }

// FailStream implements translate.StreamFailer: the Messages API's error
// event.
func (m *messages) FailStream(message, _ string) []byte {
	if !m.stream || m.usage.Ended() {
		return nil
	}
	m.usage.ended = true
	return api.MessagesErrorEvent(nil, "api_error", message)
}

// MessagesUsage reads the usage of a Messages API answer relayed as it
// came: a message, or its stream's events one at a time.
type MessagesUsage struct {
	usage   translate.Usage
	ended   bool // message_stop or an error event went by
	stopped bool // message_stop went by: the stream is complete
}

// Usage is the usage read so far.
func (u *MessagesUsage) Usage() translate.Usage { return u.usage }

// Ended reports that the stream's message_stop or error event went by.
func (u *MessagesUsage) Ended() bool { return u.ended }

// Message reads the usage of a message (none in count_tokens' answer);
// false if body is not JSON.
func (u *MessagesUsage) Message(body []byte) bool {
	var msg struct {
		Usage *usageIn `json:"usage"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false
	}
	if msg.Usage != nil {
		u.usage = msg.Usage.normalize()
	}
	return true
}

// Count reads count_tokens' answer: the tokens counted are its usage,
// which token limits are charged (a count is free of charge). An error
// wrapping translate.ErrUpstream if body is no count.
func (u *MessagesUsage) Count(body []byte) error {
	var c struct {
		InputTokens *int64 `json:"input_tokens"`
	}
	if json.Unmarshal(body, &c) != nil || c.InputTokens == nil || *c.InputTokens < 0 {
		return api.Unusable("the provider's answer is no token count")
	}
	u.usage = translate.Usage{PromptTokens: *c.InputTokens, TotalTokens: *c.InputTokens}
	return nil
}

// Event reads the usage of message_start and message_delta (whose counts
// are cumulative; input counts left out keep message_start's);
// message_stop and error end the stream.
func (u *MessagesUsage) Event(data []byte) {
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
			u.usage = ev.Message.Usage.normalize()
		}
	case "message_delta":
		if ev.Usage != nil {
			u.usage = ev.Usage.after(u.usage)
		}
	case "message_stop":
		u.ended, u.stopped = true, true
	case "error":
		u.ended = true
	}
}

// EndStream is the end of the provider's stream: without message_stop
// (broken off, or ended by an error event) the usage is partial, what the
// provider reported on the way.
func (u *MessagesUsage) EndStream() {
	if !u.stopped {
		u.usage.Partial = true
	}
}

// messagesError is a provider's error as the client gets it: Anthropic's
// as it came, but a refusal of the gateway's credentials, which is told
// as the gateway's failure; a body that is no Anthropic error becomes
// one.
func messagesError(body []byte) []byte {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	switch {
	case json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Message == "":
		return api.MessagesError("api_error", "The provider answered with an error the gateway could not read.")
	case e.Error.Type == "authentication_error" || e.Error.Type == "permission_error":
		return api.MessagesError("api_error", "The provider rejected the gateway's credentials for this backend.")
	}
	return body
}

var _ translate.Reporter = (*messages)(nil)
