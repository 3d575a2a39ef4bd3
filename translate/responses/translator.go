package responses

import (
	"encoding/json"
	"errors"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Translator serves one Responses exchange on top of a provider's chat
// translator: the request goes out as chat, and the chat output comes back
// as a Response object or its event stream.
type Translator struct {
	report  translate.Output // what the last ResponseBody returned
	chat    translate.Translator
	req     *Request
	history []json.RawMessage
	id      string
	created int64
	head    translate.Head
	stream  *Stream
	body    []byte // the whole Response, for JSON exchanges
	output  []json.RawMessage
	opts    options
}

// NewTranslator wraps chat, which was built from ToChat(r, history, opts).
// id and created identify the response being made.
func NewTranslator(chat translate.Translator, r *Request, history []json.RawMessage, id string, created int64, opts ...Option) *Translator {
	return &Translator{chat: chat, req: r, history: history, id: id, created: created, opts: optionsOf(opts)}
}

// MaxOutputTokens implements translate.OutputBound for the chat
// translator inside.
func (t *Translator) MaxOutputTokens() int64 { return translate.MaxOutputTokens(t.chat) }

// RequestBody implements translate.Translator. A chat translator's
// refusal of the chat request names the Responses member it came from.
func (t *Translator) RequestBody() (translate.Upstream, error) {
	up, err := t.chat.RequestBody()
	return up, responsesError(err)
}

// responsesError rewrites a client error about the chat request the
// bridge built so that it names the member of the client's Responses
// request: reasoning.effort rather than reasoning_effort. Other errors
// pass as they are.
func responsesError(err error) error {
	var re *api.RequestError
	if !errors.As(err, &re) || re.Param == "" {
		return err
	}
	param := responsesParam(re.Param)
	if param == re.Param {
		return err
	}
	out := *re
	out.Param = param
	out.Message = strings.ReplaceAll(re.Message, "'"+re.Param+"'", "'"+param+"'")
	return &out
}

// responsesParam is the Responses member a chat request's param comes
// from. A message is some input item, or the instructions, which the
// chat request does not tell apart.
func responsesParam(chat string) string {
	name, rest, _ := strings.Cut(chat, ".")
	base, index, _ := strings.Cut(name, "[")
	switch base {
	case "reasoning_effort":
		return "reasoning.effort"
	case "max_completion_tokens", "max_tokens":
		return "max_output_tokens"
	case "response_format":
		return "text.format"
	case "messages":
		return "input"
	case "tools":
		// Responses function tools are the chat tools' functions.
		if f, ok := strings.CutPrefix(rest, "function"); ok && index != "" && (f == "" || f[0] == '.') {
			return "tools[" + index + f
		}
	}
	return chat
}

// ResponseHeaders implements translate.Translator.
func (t *Translator) ResponseHeaders(status int, contentType string) translate.Head {
	t.head = t.chat.ResponseHeaders(status, contentType)
	if t.head.Status/100 == 2 {
		t.head.Warning = joinWarnings(t.req.tools.warning(t.opts.webSearch), t.head.Warning)
	}
	if t.head.Stream {
		t.stream = NewStream(t.req, t.id, t.created)
		t.stream.cacheWrites = func() int64 { return t.chat.Usage().CacheWriteTokens }
	}
	return t.head
}

func joinWarnings(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (t *Translator) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := t.responseBody(chunk, endOfStream)
	t.report.Later(translate.Responses, out, t.head.Status, t.stream != nil)
	return out, err
}

// Output implements translate.Reporter.
func (t *Translator) Output() *translate.Output { return t.report.Scanned() }

// responseBody implements translate.Translator. A chat completion the
// Response cannot be made of (no choice) is an error wrapping
// translate.ErrUpstream, as are the chat translator's own.
func (t *Translator) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := t.chat.ResponseBody(chunk, endOfStream)
	switch {
	case err != nil:
		return nil, err
	case t.stream != nil:
		events := t.stream.Feed(out, endOfStream)
		if t.output == nil {
			t.output = t.stream.Output() // once the stream completed
		}
		return events, nil
	case t.head.Status/100 != 2:
		return out, nil // already an OpenAI error object
	}
	if t.body, err = fromChat(t.req, out, t.id, t.created, t.chat.Usage().CacheWriteTokens); err != nil {
		return nil, api.AsUnusable(err)
	}
	var resp struct {
		Output []json.RawMessage `json:"output"`
	}
	json.Unmarshal(t.body, &resp) //nolint:errcheck // just marshaled
	t.output = resp.Output
	return t.body, nil
}

// FailStream implements translate.StreamFailer.
func (t *Translator) FailStream(message, code string) []byte {
	if t.stream == nil {
		return nil
	}
	return t.stream.Fail(message, code)
}

// ID is the response's id.
func (t *Translator) ID() string { return t.id }

// Usage implements translate.Translator.
func (t *Translator) Usage() translate.Usage { return t.chat.Usage() }

// Conversation returns the items a continuation of this response replays:
// the earlier conversation, this request's input and this response's
// output. It is nil until the response completed successfully.
func (t *Translator) Conversation() []json.RawMessage {
	if t.output == nil {
		return nil
	}
	input, _ := t.req.Items()
	out := append(append(append([]json.RawMessage(nil), t.history...), input...), t.output...)
	return out
}

// Output returns the completed output items of the stream, or nil if it
// did not complete.
func (s *Stream) Output() []json.RawMessage {
	if !s.done || s.failed {
		return nil
	}
	out := []json.RawMessage{}
	for _, it := range s.items {
		b, _ := json.Marshal(it.item("completed"))
		out = append(out, b)
	}
	return out
}

var _ translate.Translator = (*Translator)(nil)

var _ translate.Reporter = (*Translator)(nil)
