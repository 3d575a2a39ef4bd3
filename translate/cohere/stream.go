package cohere

import (
	"encoding/json"
	"slices"
	"strconv"

	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

type eventIn struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Index int    `json:"index"`
	Delta struct {
		// Message's members change shape by event type (message-start
		// sends arrays), so they are decoded per type.
		Message struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string   `json:"finish_reason"`
		Usage        *usageIn `json:"usage"`
		Error        string   `json:"error"`
	} `json:"delta"`
}

type contentDelta struct {
	Text string `json:"text"`
}

type toolCallDelta struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// streamState is what the stream translation keeps for its chunks.
type streamState struct {
	head []byte // the chunks' ChunkHead, for the current id
	ev   fastEvent
}

// streamChunk translates the events a chunk completes.
func (c *chat) streamChunk(chunk []byte, endOfStream bool) []byte {
	var out []byte
	for _, ev := range c.dec.Feed(chunk) {
		if !c.done {
			out = c.event(out, ev.Data)
		}
	}
	if c.dec.Err() != nil && !c.done {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: openai.StreamEventTooLarge}))
	}
	if endOfStream && !c.done {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		out = sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	return out
}

// event translates one event. Content and tool call deltas, and the
// events that carry nothing for the client, are read in one pass and
// written by appending; message-start and message-end, and whatever that
// reading does not expect (nulls, keys spelled in another case,
// duplicate keys, deep nesting, malformed JSON), take decodedEvent, whose
// encoding/json decoding decides as it always did.
func (c *chat) event(out, data []byte) []byte {
	ev := &c.st.ev
	defer func() { *ev = fastEvent{} }() // lets go of the event
	if !ev.read(data) {
		return c.decodedEvent(out, data)
	}
	var scratch []byte
	switch string(jsonscan.Unquote(ev.typ, &scratch)) {
	case "content-delta":
		return c.contentDelta(out, ev.content)
	case "tool-call-start":
		c.calls++
		return c.toolCallDelta(out, ev.toolCalls, true)
	case "tool-call-delta":
		return c.toolCallDelta(out, ev.toolCalls, false)
	case "message-start", "message-end":
		return c.decodedEvent(out, data)
	}
	return out // content-start/end, tool-plan-delta, tool-call-end, citations
}

// contentDelta appends the chunk of a content-delta's text.
func (c *chat) contentDelta(out, content []byte) []byte {
	text, ok := readContent(content)
	if !ok {
		return c.decodedContent(out, content)
	}
	out = c.begin(out, len(`{"index":0,"delta":{"content":""},"finish_reason":null}`)+len(text)+len(text)/8)
	out = append(out, `{"index":0,"delta":{"content":"`...)
	out = jsonscan.AppendTokenBody(out, text)
	out = append(out, `"},"finish_reason":null}`...)
	return append(out, api.ChunkTail...)
}

// toolCallDelta appends the chunk that starts a tool call (which calls
// already counts) or continues its arguments, as decodedToolCall does.
func (c *chat) toolCallDelta(out, raw []byte, start bool) []byte {
	id, name, args, ok := readToolCall(raw)
	if !ok {
		return c.decodedToolCall(out, raw, start)
	}
	out = c.begin(out, len(`{"index":0,"delta":{"tool_calls":[{"index":,"id":"","type":"function","function":{"name":"","arguments":""}}]},"finish_reason":null}`)+20+
		len(id)+len(name)+len(args)+len(args)/8)
	out = append(out, `{"index":0,"delta":{"tool_calls":[{"index":`...)
	out = strconv.AppendInt(out, int64(max(c.calls-1, 0)), 10)
	if start {
		if len(id) > 2 {
			out = append(out, `,"id":"`...)
			out = jsonscan.AppendTokenBody(out, id)
			out = append(out, '"')
		}
		out = append(out, `,"type":"function","function":{`...)
		if len(name) > 2 {
			out = append(out, `"name":"`...)
			out = jsonscan.AppendTokenBody(out, name)
			out = append(out, `",`...)
		}
	} else {
		out = append(out, `,"function":{`...)
	}
	out = append(out, `"arguments":"`...)
	out = jsonscan.AppendTokenBody(out, args)
	out = append(out, `"}}]},"finish_reason":null}`...)
	return append(out, api.ChunkTail...)
}

// begin makes room for a chunk whose choice takes about size bytes (its
// text with some escapes), so that one allocation is the usual, and
// appends the chunks' head.
func (c *chat) begin(out []byte, size int) []byte {
	if c.st.head == nil {
		c.st.head = c.chunks().ChunkHead()
	}
	if need := len(c.st.head) + size + len(api.ChunkTail); cap(out)-len(out) < need {
		out = slices.Grow(out, need)
	}
	return append(out, c.st.head...)
}

// decodedEvent translates one event through encoding/json.
func (c *chat) decodedEvent(out, data []byte) []byte {
	var ev eventIn
	if err := json.Unmarshal(data, &ev); err != nil {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: "The provider sent a stream event that is not JSON."}))
	}
	switch ev.Type {
	case "message-start":
		c.id, c.st.head = ev.ID, nil
		empty := ""
		return c.emit(out, api.Delta{Role: "assistant", Content: &empty}, nil)
	case "content-delta":
		return c.decodedContent(out, ev.Delta.Message.Content)
	case "tool-call-start":
		c.calls++
		return c.decodedToolCall(out, ev.Delta.Message.ToolCalls, true)
	case "tool-call-delta":
		return c.decodedToolCall(out, ev.Delta.Message.ToolCalls, false)
	case "message-end":
		return c.end(out, ev)
	}
	return out // content-start/end, tool-plan-delta, tool-call-end, citations
}

// decodedContent appends the chunk of a content-delta's text, decoded.
func (c *chat) decodedContent(out, content []byte) []byte {
	var cd contentDelta
	json.Unmarshal(content, &cd) //nolint:errcheck // a malformed delta carries no text
	return c.emit(out, api.Delta{Content: &cd.Text}, nil)
}

// decodedToolCall starts a tool call (which calls already counts) or
// continues its arguments, decoded.
func (c *chat) decodedToolCall(out, raw []byte, start bool) []byte {
	var td toolCallDelta
	json.Unmarshal(raw, &td) //nolint:errcheck // a malformed delta carries nothing
	var tc api.ToolCall
	if start {
		tc.ID, tc.Type, tc.Function.Name = td.ID, "function", td.Function.Name
	}
	idx := max(c.calls-1, 0)
	tc.Index, tc.Function.Arguments = &idx, td.Function.Arguments
	return c.emit(out, api.Delta{ToolCalls: []api.ToolCall{tc}}, nil)
}

func (c *chat) end(out []byte, ev eventIn) []byte {
	c.done = true
	if ev.Delta.Error != "" {
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: ev.Delta.Error}))
	}
	if ev.Delta.Usage != nil {
		c.usage = ev.Delta.Usage.normalize()
	}
	reason := finishReason(ev.Delta.FinishReason)
	out = c.emit(out, api.Delta{}, &reason)
	if c.req.IncludeUsage {
		out = c.chunks().Usage(out, c.usage)
	}
	return append(out, api.DoneEvent...)
}

// chunks writes the stream's chunks, which name the model the client
// asked for, not Cohere's id for it: clients compare the two.
func (c *chat) chunks() api.ChunkWriter {
	return api.ChunkWriter{ID: c.id, Model: c.req.Model, Created: c.created}
}

func (c *chat) emit(out []byte, d api.Delta, finish *string) []byte {
	return c.chunks().Delta(out, d, finish)
}

// fastEvent is an event as read in one pass: the members eventIn
// decodes, as their tokens or raw JSON (nil when absent).
type fastEvent struct {
	typ, content, toolCalls []byte
}

// Member names eventIn and the deltas decode: any other spelling of them
// goes to encoding/json.
var (
	eventKeys    = []string{"type", "id", "index", "delta"}
	deltaKeys    = []string{"message", "finish_reason", "usage", "error"}
	messageKeys  = []string{"content", "tool_calls"}
	contentKeys  = []string{"text"}
	toolCallKeys = []string{"id", "function"}
	functionKeys = []string{"name", "arguments"}
)

// read reads data in one pass; false if it must be decoded instead. The
// usage of message-end is left to decoding.
func (e *fastEvent) read(data []byte) bool {
	*e = fastEvent{}
	cur := jsonscan.NewCursor(data)
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "type":
			cur.Once(&seen, 1)
			e.typ = cur.StringToken()
		case "id":
			cur.Once(&seen, 2)
			cur.StringToken()
		case "index":
			cur.Once(&seen, 4)
			if n := cur.Int(); int64(int(n)) != n {
				cur.Fail()
			}
		case "delta":
			cur.Once(&seen, 8)
			e.delta(&cur)
		default:
			cur.SkipUnknown(key, eventKeys)
		}
	}
	return cur.End()
}

func (e *fastEvent) delta(cur *jsonscan.Cursor) {
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "message":
			cur.Once(&seen, 1)
			for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
				switch string(key) {
				case "content":
					cur.Once(&seen, 2)
					e.content = cur.Skip()
				case "tool_calls":
					cur.Once(&seen, 4)
					e.toolCalls = cur.Skip()
				default:
					cur.SkipUnknown(key, messageKeys)
				}
			}
		case "finish_reason":
			cur.Once(&seen, 8)
			cur.StringToken()
		case "error":
			cur.Once(&seen, 16)
			cur.StringToken()
		default: // usage too
			cur.SkipUnknown(key, deltaKeys)
		}
	}
}

// readContent reads the text token of a content-delta's content; false
// if it must be decoded instead.
func readContent(raw []byte) ([]byte, bool) {
	var text []byte
	cur := jsonscan.NewCursor(raw)
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		if string(key) != "text" {
			cur.SkipUnknown(key, contentKeys)
			continue
		}
		cur.Once(&seen, 1)
		text = cur.StringToken()
	}
	return text, cur.End()
}

// readToolCall reads the tokens of a tool call delta; false if it must be
// decoded instead.
func readToolCall(raw []byte) (id, name, args []byte, ok bool) {
	cur := jsonscan.NewCursor(raw)
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "id":
			cur.Once(&seen, 1)
			id = cur.StringToken()
		case "function":
			cur.Once(&seen, 2)
			for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
				switch string(key) {
				case "name":
					cur.Once(&seen, 4)
					name = cur.StringToken()
				case "arguments":
					cur.Once(&seen, 8)
					args = cur.StringToken()
				default:
					cur.SkipUnknown(key, functionKeys)
				}
			}
		default:
			cur.SkipUnknown(key, toolCallKeys)
		}
	}
	return id, name, args, cur.End()
}
