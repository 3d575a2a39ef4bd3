package responses

import (
	"bytes"
	"encoding/json"
	"mime"
	"strconv"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

// Passthrough relays a Responses exchange to a backend that serves the
// Responses API itself (OpenAI; Azure OpenAI through its own wrapper). The
// gateway still keeps the conversation: a continuation goes upstream as the
// stored items followed by the new input, never as previous_response_id,
// because the provider scopes its ids to the gateway's provider key (every
// account would see every other's) and cannot know responses another
// provider produced.
//
// What comes back is relayed with the model the client asked for, whatever
// id the provider names (clients compare the two), and the edits that make
// it valid against the specification, which real traffic is not: OpenAI
// sends "user": null and "usage": null where the schema allows no null,
// leaves out cache_write_tokens and, in older API versions,
// sequence_number, logprobs and the name on function_call_arguments.done.
type Passthrough struct {
	report  translate.Output // what the last ResponseBody returned
	target  translate.Target
	req     *Request
	history []json.RawMessage
	head    translate.Head
	stream  bool
	dec     sse.Decoder
	seq     int
	names   map[string]string // function call name by item id
	ended   bool              // a terminal event or an error was relayed
	last    json.RawMessage   // the Response of the latest event that held one
	out     []byte            // the events of one chunk, reused
	scratch []byte            // a decoded event type, see jsonscan.Unquote
	id      string
	output  []json.RawMessage // set once the response completed
	usage   translate.Usage
}

// NewPassthrough returns the translator for r on provider openai. history
// is the stored conversation r continues, nil if none. The client sees the
// response as id, like a bridged one: the provider's id means nothing to
// it (continuations never reach the provider by id), and the gateway's
// store does not rely on any provider's ids being unique.
func NewPassthrough(t translate.Target, r *Request, history []json.RawMessage, id string) *Passthrough {
	return &Passthrough{target: t, req: r, history: history, id: id}
}

// RequestBody sends the client's request with the upstream model and the
// stored conversation inlined in place of previous_response_id.
func (p *Passthrough) RequestBody() (translate.Upstream, error) {
	members := make(map[string]json.RawMessage, len(p.req.Members)+1)
	for k, v := range p.req.Members {
		members[k] = v
	}
	var err error
	if members["model"], err = json.Marshal(p.target.Model); err != nil {
		return translate.Upstream{}, err
	}
	delete(members, "previous_response_id")
	// The stored conversation inlined, and the gateway's compaction items
	// (of a conversation compacted on another provider) as the summaries
	// they stand for, which OpenAI can read. Any other input goes as the
	// client sent it, undecoded.
	if p.req.PreviousResponseID != "" || bytes.Contains(p.req.Members["input"], []byte(sealPrefix)) {
		input, err := p.req.Items()
		if err != nil {
			return translate.Upstream{}, err
		}
		all, _ := withSummaries(append(replayable(p.history, p.req.noItemTools), input...))
		if members["input"], err = api.Marshal(all); err != nil {
			return translate.Upstream{}, err
		}
	}
	body, err := api.Marshal(members)
	if err != nil {
		return translate.Upstream{}, err
	}
	up := translate.Upstream{Body: body, Path: p.target.BasePath + "/v1/responses",
		Headers: []translate.Header{{Name: "content-type", Value: "application/json"}}}
	if p.target.APIKey != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "authorization", Value: "Bearer " + p.target.APIKey})
	}
	return up, nil
}

// replayable prepares stored items for a provider that serves Responses:
// the ids of messages and function calls name items in the store of
// whichever provider made them, so they are left out (they are optional on
// input), a reasoning item is only replayed when it carries its
// encrypted content, the one form that needs no provider-side store, and
// additional_tools items go when the request goes without their tools
// (noItemTools).
func replayable(items []json.RawMessage, noItemTools bool) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	for _, raw := range items {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		switch memberType(m) {
		case additionalTools:
			if noItemTools {
				continue
			}
		case "reasoning":
			if isNull(m["encrypted_content"]) {
				continue
			}
		case "message", "function_call", "function_call_output":
			if _, ok := m["id"]; ok {
				delete(m, "id")
				raw, _ = api.Marshal(m)
			}
		}
		out = append(out, raw)
	}
	return out
}

// ResponseHeaders implements translate.Translator.
func (p *Passthrough) ResponseHeaders(status int, contentType string) translate.Head {
	mt, _, _ := mime.ParseMediaType(contentType)
	if status >= 200 && status < 300 && mt == "text/event-stream" {
		p.stream = true
		p.head = translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	} else {
		p.head = translate.Head{Status: api.ClientStatus(status), ContentType: "application/json"}
	}
	return p.head
}

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (p *Passthrough) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := p.responseBody(chunk, endOfStream)
	p.report.Later(translate.Responses, out, p.head.Status, p.stream)
	return out, err
}

// Output implements translate.Reporter.
func (p *Passthrough) Output() *translate.Output { return p.report.Scanned() }

// responseBody implements translate.Translator. A success body that is
// no Response object (not a JSON object, or without an output array) is
// an error wrapping translate.ErrUpstream.
func (p *Passthrough) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if p.stream {
		return p.events(chunk, endOfStream), nil
	}
	if p.head.Status/100 != 2 {
		return api.ProviderError(p.head.Status, chunk), nil
	}
	var shape struct {
		Output json.RawMessage `json:"output"`
	}
	if err := api.DecodeUpstream(chunk, &shape, "Response object"); err != nil {
		return nil, err
	}
	if !api.ObjectArray(shape.Output) {
		return nil, api.Unusable("the provider's Response object has no output array of items")
	}
	out, ok := p.response(chunk, true)
	if !ok {
		return nil, api.Unusable("the provider's Response object does not decode")
	}
	return out, nil
}

// events relays the complete events in chunk, numbered from 0. A stream
// that ends without a terminal event ends with an error event.
func (p *Passthrough) events(chunk []byte, end bool) []byte {
	out := p.out[:0]
	for _, ev := range p.dec.Feed(chunk) {
		if p.ended {
			continue
		}
		out = p.event(out, ev.Data)
	}
	if p.dec.Err() != nil && !p.ended {
		out = p.fail(out, openai.StreamEventTooLarge)
	}
	if end && !p.ended {
		out = p.fail(out, "The provider's stream ended before the response completed.")
	}
	p.out = reusable(out)
	return append([]byte(nil), out...)
}

func (p *Passthrough) event(out, data []byte) []byte {
	if typ, ok := p.valid(data); ok {
		p.seq++
		// sse.AppendEvent, for a type in bytes
		out = append(out, "event: "...)
		out = append(out, typ...)
		out = append(out, '\n')
		return sse.AppendData(out, data)
	}
	var m map[string]json.RawMessage
	var typ string
	if json.Unmarshal(data, &m) != nil || m == nil || json.Unmarshal(m["type"], &typ) != nil || !eventType(typ) {
		return p.fail(out, "The provider sent a stream event that is not a Responses event.")
	}
	switch typ {
	case "response.completed", "response.incomplete", "response.failed", "error":
		p.ended = true
	}
	if raw, ok := m["response"]; ok {
		m["response"], _ = p.response(raw, typ == "response.completed" || typ == "response.incomplete")
		p.last = m["response"]
	}
	if raw, ok := m["item"]; ok {
		m["item"] = p.item(raw)
	}
	if raw, ok := m["part"]; ok {
		m["part"] = textPartWithLists(raw)
	}
	switch typ {
	case "response.output_text.delta", "response.output_text.done":
		setAbsent(m, "logprobs", "[]")
	case "response.function_call_arguments.done":
		if _, ok := m["name"]; !ok {
			var id string
			json.Unmarshal(m["item_id"], &id) //nolint:errcheck // an unknown item has no name
			m["name"], _ = json.Marshal(p.names[id])
		}
	case "error":
		setAbsent(m, "code", "null")
		setAbsent(m, "param", "null")
		var e struct {
			Code    *string
			Message string
		}
		json.Unmarshal(data, &e) //nolint:errcheck // a code or message of another type counts as none
		return p.failed(p.emit(out, typ, m), e.Code, e.Message)
	}
	return p.emit(out, typ, m)
}

// deltaHead is what valid reads of an event.
type deltaHead struct {
	Type     string          `json:"type"`
	Seq      *int            `json:"sequence_number"`
	Logprobs json.RawMessage `json:"logprobs"`
}

// valid is the fast path for the bulk of a stream: a delta event that is
// already valid and numbered as relayed passes unchanged. It returns the
// event's type.
func (p *Passthrough) valid(data []byte) ([]byte, bool) {
	if !bytes.Contains(data, []byte(`.delta"`)) { // not a delta: spare the decode
		return nil, false
	}
	typ, seq, logprobs, ok := plainDeltaHead(data, &p.scratch)
	if !ok {
		var h deltaHead
		if json.Unmarshal(data, &h) != nil || h.Seq == nil {
			return nil, false
		}
		typ, seq, logprobs = []byte(h.Type), *h.Seq, h.Logprobs != nil
	}
	// eventType, without making a string of typ
	if seq != p.seq || !bytes.HasSuffix(typ, []byte(".delta")) || bytes.ContainsAny(typ, "\r\n") {
		return nil, false
	}
	if string(typ) == "response.output_text.delta" && !logprobs {
		return nil, false
	}
	return typ, true
}

var deltaHeadNames = []string{"type", "sequence_number", "logprobs"}

// plainDeltaHead reads what valid needs of an event, the type, the
// sequence number and whether logprobs is present, in place, where
// decoding a deltaHead cost most of a relayed delta's time. The type may
// be decoded into scratch (see jsonscan.Unquote). It reports false for an
// event it cannot be sure to read as encoding/json would: valid decodes
// that one.
func plainDeltaHead(data []byte, scratch *[]byte) (typ []byte, seq int, logprobs, ok bool) {
	var m [3][]byte
	if !jsonscan.Valid(data) || !jsonscan.PlainMembers(data, deltaHeadNames, m[:]) {
		return nil, 0, false, false
	}
	t, n, lp := m[0], m[1], m[2]
	// Anything but a string type, an int sequence number and a logprobs
	// member that is absent or not null is left to encoding/json.
	if jsonscan.Kind(t) != jsonscan.String || !jsonscan.IsInt(n) || lp != nil && jsonscan.IsNull(lp) {
		return nil, 0, false, false
	}
	seq, err := strconv.Atoi(string(n))
	if err != nil {
		return nil, 0, false, false
	}
	return jsonscan.Unquote(t, scratch), seq, lp != nil, true
}

// eventType reports whether typ can name an SSE event: a line break in it
// would let the provider forge events.
func eventType(typ string) bool {
	return typ != "" && !strings.ContainsAny(typ, "\r\n")
}

func (p *Passthrough) emit(out []byte, typ string, m map[string]json.RawMessage) []byte {
	m["sequence_number"], _ = json.Marshal(p.seq)
	p.seq++
	b, err := api.Marshal(m)
	if err != nil { // cannot happen: the members were decoded
		panic(err)
	}
	return sse.AppendEvent(out, typ, b)
}

// FailStream implements translate.StreamFailer.
func (p *Passthrough) FailStream(message, code string) []byte {
	if !p.stream || p.ended {
		return nil
	}
	return p.failWith(nil, message, code)
}

// fail ends the stream with a server_error event and response.failed.
func (p *Passthrough) fail(out []byte, msg string) []byte {
	return p.failWith(out, msg, "server_error")
}

// failWith ends the stream with an error event of code and
// response.failed.
func (p *Passthrough) failWith(out []byte, msg, code string) []byte {
	p.ended = true
	m := map[string]json.RawMessage{"message": mustJSON(msg), "code": mustJSON(code),
		"param": json.RawMessage("null"), "type": json.RawMessage(`"error"`)}
	return p.failed(p.emit(out, "error", m), &code, msg)
}

// failed follows an error event with response.failed, the Response as
// the stream last showed it, for clients that ignore error events
// (Codex). Before any Response was shown there is none to fail.
func (p *Passthrough) failed(out []byte, code *string, msg string) []byte {
	var r map[string]json.RawMessage
	if json.Unmarshal(p.last, &r) != nil || r == nil {
		return out
	}
	r["status"] = json.RawMessage(`"failed"`)
	r["error"], _ = json.Marshal(failedError(code, msg))
	b, _ := api.Marshal(r)
	return p.emit(out, "response.failed", map[string]json.RawMessage{"type": json.RawMessage(`"response.failed"`), "response": b})
}

// response makes a Response object valid and, when final, keeps its id,
// output and usage.
func (p *Passthrough) response(raw json.RawMessage, final bool) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw, false
	}
	for _, k := range []string{"user", "usage"} {
		if isNull(m[k]) {
			delete(m, k)
		}
	}
	m["id"] = mustJSON(p.id)
	if !jsonscan.IsText(m["model"], p.req.Model) {
		m["model"] = jsonscan.AppendQuoted(nil, p.req.Model)
	}
	if p.req.PreviousResponseID != "" {
		m["previous_response_id"] = mustJSON(p.req.PreviousResponseID)
	}
	if u, ok := m["usage"]; ok {
		m["usage"] = p.readUsage(u)
	}
	var output []json.RawMessage
	if json.Unmarshal(m["output"], &output) == nil {
		for i, it := range output {
			output[i] = p.item(it)
		}
		m["output"], _ = api.Marshal(output)
	}
	var status string
	json.Unmarshal(m["status"], &status) //nolint:errcheck // no status stores nothing
	if final && (status == "completed" || status == "incomplete") {
		if output == nil {
			output = []json.RawMessage{}
		}
		p.output = output
		p.usage.WebSearchRequests = webSearches(output)
	}
	b, err := api.Marshal(m)
	if err != nil {
		return raw, false
	}
	return b, true
}

// readUsage records the usage and adds the details the schema requires.
func (p *Passthrough) readUsage(raw json.RawMessage) json.RawMessage {
	var u struct {
		InputTokens         int64                      `json:"input_tokens"`
		OutputTokens        int64                      `json:"output_tokens"`
		TotalTokens         int64                      `json:"total_tokens"`
		InputTokensDetails  map[string]json.RawMessage `json:"input_tokens_details"`
		OutputTokensDetails map[string]json.RawMessage `json:"output_tokens_details"`
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &u) != nil || json.Unmarshal(raw, &m) != nil {
		return raw
	}
	var cached, reasoning int64
	json.Unmarshal(u.InputTokensDetails["cached_tokens"], &cached)        //nolint:errcheck // absent counts zero
	json.Unmarshal(u.OutputTokensDetails["reasoning_tokens"], &reasoning) //nolint:errcheck // absent counts zero
	p.usage = translate.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedTokens: cached, ReasoningTokens: reasoning}
	in := u.InputTokensDetails
	if in == nil {
		in = map[string]json.RawMessage{}
	}
	setAbsent(in, "cached_tokens", "0")
	setAbsent(in, "cache_write_tokens", "0")
	out := u.OutputTokensDetails
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	setAbsent(out, "reasoning_tokens", "0")
	m["input_tokens_details"], m["output_tokens_details"] = mustJSON(in), mustJSON(out)
	return mustJSON(m)
}

// webSearches counts the web searches of a Response's output, which
// OpenAI bills per call apart from tokens: its web_search_call items but
// those whose action opened a page or searched within one, which, as
// OpenAI's web search guide documents, incur no tool call cost (an item
// without an action, as older answers have, searched).
func webSearches(output []json.RawMessage) int64 {
	var n int64
	for _, raw := range output {
		var it struct {
			Type   string `json:"type"`
			Action *struct {
				Type string `json:"type"`
			} `json:"action"`
		}
		if json.Unmarshal(raw, &it) != nil || it.Type != "web_search_call" {
			continue
		}
		if it.Action == nil || (it.Action.Type != "open_page" && it.Action.Type != "find_in_page") {
			n++
		}
	}
	return n
}

// item fills what an output item's schema requires and remembers function
// call names for function_call_arguments.done.
func (p *Passthrough) item(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	switch memberType(m) {
	case "function_call":
		var id, name string
		json.Unmarshal(m["id"], &id)     //nolint:errcheck // unnamed calls stay unnamed
		json.Unmarshal(m["name"], &name) //nolint:errcheck // as above
		if p.names == nil {
			p.names = map[string]string{}
		}
		p.names[id] = name
		return raw
	case "message":
		var parts []json.RawMessage
		if json.Unmarshal(m["content"], &parts) != nil {
			return raw
		}
		for i, part := range parts {
			parts[i] = textPartWithLists(part)
		}
		m["content"] = mustJSON(parts)
		return mustJSON(m)
	}
	return raw
}

// textPartWithLists gives an output_text part the annotations and logprobs
// lists the schema requires.
func textPartWithLists(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil || memberType(m) != "output_text" {
		return raw
	}
	_, a := m["annotations"]
	_, l := m["logprobs"]
	if a && l {
		return raw
	}
	setAbsent(m, "annotations", "[]")
	setAbsent(m, "logprobs", "[]")
	return mustJSON(m)
}

// memberType is the "type" of an already decoded object.
func memberType(m map[string]json.RawMessage) string { return stringOf(m["type"]) }

func setAbsent(m map[string]json.RawMessage, key, value string) {
	if _, ok := m[key]; !ok {
		m[key] = json.RawMessage(value)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: decoded JSON and plain values only
		panic(err)
	}
	return b
}

// ID is the response's id.
func (p *Passthrough) ID() string { return p.id }

// Usage implements translate.Translator.
func (p *Passthrough) Usage() translate.Usage { return p.usage }

// Conversation returns the items a continuation replays: the earlier
// conversation, this request's input and the response's output. It is nil
// until the response completed.
func (p *Passthrough) Conversation() []json.RawMessage {
	if p.output == nil {
		return nil
	}
	input, _ := p.req.Items()
	return append(append(append([]json.RawMessage(nil), p.history...), input...), p.output...)
}

var _ translate.Translator = (*Passthrough)(nil)

var _ translate.Reporter = (*Passthrough)(nil)
