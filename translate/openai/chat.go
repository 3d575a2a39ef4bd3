package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
)

// chat translates chat completions for backends that speak the OpenAI API.
type chat struct {
	report  translate.Output // what the last ResponseBody returned
	target  translate.Target
	req     *api.ChatRequest
	status  int
	stream  bool
	dec     sse.Decoder
	usage   translate.Usage
	done    bool // [DONE] or an error event was seen
	sawDone bool // [DONE] was seen: it is emitted last
	quirks  Quirks
	// compatible: a server of the OpenAI-compatible family, whose members
	// of its own are removed from answers (chunkFix.vendor).
	compatible bool
	scratch    []jsonscan.Member
	fix        chunkFix
}

// NewChat returns the chat translator for provider openai and
// openai-compatible backends.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	return &chat{target: t, req: req, fix: answerFix(req)}
}

// answerFix is the chunkFix of the answer to req, which names req's model
// as the client sent it: the member's bytes in the request, where it
// has them, so that none are made.
func answerFix(req *api.ChatRequest) chunkFix {
	f := chunkFix{model: req.Model}
	if req.ModelAt.End > 0 {
		f.quoted = req.ModelAt.Value
	}
	return f
}

// RequestBody maps the public model to the upstream one and, for streams,
// asks for usage so the gateway can always account for it.
func (c *chat) RequestBody() (translate.Upstream, error) {
	if c.req.Body != nil && c.req.ModelAt.End > 0 && c.quirks.plainRequest() && !c.quirks.stripped(c.req.Members) {
		body, err := c.editRequest()
		if err != nil {
			return translate.Upstream{}, err
		}
		return upstream(c.target, "/v1/chat/completions", "application/json", body), nil
	}
	members := make(map[string]json.RawMessage, len(c.req.Members)+1)
	for k, v := range c.req.Members {
		members[k] = v
	}
	members["model"] = jsonscan.AppendQuoted(nil, c.target.Model)
	if c.req.Stream {
		var err error
		if members["stream_options"], err = withIncludeUsage(members["stream_options"]); err != nil {
			return translate.Upstream{}, err
		}
	}
	if err := c.quirks.apply(members); err != nil {
		return translate.Upstream{}, fmt.Errorf("applying provider quirks: %w", err)
	}
	body, err := json.Marshal(members)
	if err != nil {
		return translate.Upstream{}, fmt.Errorf("encoding upstream request: %w", err)
	}
	return upstream(c.target, "/v1/chat/completions", "application/json", body), nil
}

// upstream is a request to path under the target's base path, with the
// target's key as a bearer token.
func upstream(t translate.Target, path, contentType string, body []byte) translate.Upstream {
	up := translate.Upstream{Body: body, Path: t.BasePath + path, Headers: []translate.Header{{Name: "content-type", Value: contentType}}}
	if t.APIKey != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "authorization", Value: "Bearer " + t.APIKey})
	}
	return up
}

// editRequest is RequestBody for a server without request quirks: the
// client's body with the model, and for streams stream_options, changed
// in place, at the members api.ParseChatRequest found.
func (c *chat) editRequest() ([]byte, error) {
	body, req := c.req.Body, c.req
	var quoted [64]byte // on the stack, unless the model is long
	model := jsonscan.AppendQuoted(quoted[:0], c.target.Model)
	var opts []byte // the stream's own stream_options, asking for usage
	if req.Stream && req.OptionsAt.End > 0 {
		var err error
		if opts, err = withIncludeUsage(req.OptionsAt.Value); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, len(body)+len(model)+len(`,"stream_options":{"include_usage":true}`))
	prev := 0
	edit := func(m jsonscan.Member, v []byte) {
		out = append(append(out, body[prev:m.VS]...), v...)
		prev = m.End
	}
	switch {
	case opts == nil:
		edit(req.ModelAt, model)
	case req.OptionsAt.VS < req.ModelAt.VS:
		edit(req.OptionsAt, opts)
		edit(req.ModelAt, model)
	default:
		edit(req.ModelAt, model)
		edit(req.OptionsAt, opts)
	}
	end := bytes.LastIndexByte(body, '}')
	out = append(out, body[prev:end]...)
	if req.Stream && opts == nil {
		out = append(out, `,"stream_options":{"include_usage":true}`...)
	}
	return append(out, body[end:]...), nil
}

func withIncludeUsage(raw json.RawMessage) (json.RawMessage, error) {
	opts := jsonscan.TrimSpace(raw)
	if jsonscan.IsNull(opts) {
		return json.RawMessage(`{"include_usage":true}`), nil
	}
	it, ok := jsonscan.Entries(opts, 0)
	if !ok || !it.Object || !json.Valid(opts) {
		return nil, fmt.Errorf("stream_options is not a JSON object")
	}
	out := make([]byte, 0, len(opts)+len(`,"include_usage":true`))
	prev, last := 0, -1
	for {
		m, more := it.Next()
		if !more {
			break
		}
		if string(name(m.Key)) == "include_usage" {
			out = append(append(out, opts[prev:m.VS]...), "true"...)
			prev = m.End
		}
		last = m.End
	}
	if prev > 0 {
		return append(out, opts[prev:]...), nil
	}
	if last < 0 { // {}
		return json.RawMessage(`{"include_usage":true}`), nil
	}
	out = append(append(out, opts[:last]...), `,"include_usage":true`...)
	return append(out, opts[last:]...), nil
}

// ResponseHeaders streams only successful event streams.
func (c *chat) ResponseHeaders(status int, contentType string) translate.Head {
	c.status = status
	if status >= 200 && status < 300 && translate.MediaType(contentType) == "text/event-stream" {
		c.stream = true
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	}
	return translate.Head{Status: api.ClientStatus(status), ContentType: "application/json"}
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

// responseBody translates the whole body, or one stream chunk.
func (c *chat) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if c.stream {
		return c.streamChunk(chunk, endOfStream), nil
	}
	if c.status < 200 || c.status >= 300 {
		return api.ProviderError(c.status, chunk), nil
	}
	return c.completion(chunk)
}

// members is the scratch for a document's members, empty; made once at
// the size of most documents rather than grown a member at a time.
func (c *chat) members() []jsonscan.Member {
	if c.scratch == nil {
		c.scratch = make([]jsonscan.Member, 0, 16)
	}
	return c.scratch[:0]
}

// Usage implements translate.Translator.
func (c *chat) Usage() translate.Usage { return c.usage }

var _ translate.Reporter = (*chat)(nil)
