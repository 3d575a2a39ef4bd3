package responses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

// Stream turns the chat completion chunks a provider's chat translator
// emits into the Responses API's typed events: response.created and
// .in_progress, then per output item .output_item.added, the part and
// delta events and .output_item.done, and last response.completed (or
// .incomplete), each with a sequence_number counting from 0 and no [DONE].
// It is not safe for concurrent use.
type Stream struct {
	req     *Request
	id      string
	created int64
	seq     int
	dec     sse.Decoder
	out     []byte
	scratch []byte  // decoded delta text, see jsonscan.Unquote
	pieces  []piece // of the chunk plainChunk reads

	started   bool
	items     []*outItem // in output order
	message   *outItem   // the message item, once text or a refusal came
	reasoning *outItem
	calls     map[int]*outItem // by chat tool call index
	finish    string
	usage     *api.Usage
	done      bool
	failed    bool
	// cacheWrites, when set, tells the prompt tokens the provider wrote to
	// its cache, once the stream's usage is known.
	cacheWrites func() int64
}

// outItem is an output item being streamed.
type outItem struct {
	kind    string // message, function_call, reasoning
	index   int
	id      string
	idJSON  []byte // id as a JSON string, for the delta events
	callID  string
	tool    clientTool // of a function_call
	text    strings.Builder
	blocks  []api.ThinkingBlock // of a reasoning item
	refusal strings.Builder     // of a message
	parts   []string            // a message's content part types, in order (streammessage.go)
}

// NewStream starts the event stream of response id for r.
func NewStream(r *Request, id string, created int64) *Stream {
	return &Stream{req: r, id: id, created: created, calls: map[int]*outItem{}}
}

// chatEvent is one event of a chat completion stream: a chunk, or the
// error event a chat translator ends a failed stream with.
type chatEvent struct {
	api.ChatCompletionChunk
	Error *api.ErrorObject `json:"error"`
}

// Feed takes the chat translator's client bytes and returns the Responses
// events they complete; at end it closes the response.
func (s *Stream) Feed(chatSSE []byte, end bool) []byte {
	s.out = s.out[:0]
	for _, ev := range s.dec.Feed(chatSSE) {
		if !s.done {
			s.chatEvent(ev.Data)
		}
	}
	if s.dec.Err() != nil && !s.done {
		s.failServer(openai.StreamEventTooLarge)
	}
	if end && !s.done {
		s.complete()
	}
	return s.taken()
}

// Fail ends the response with an error event of code and
// response.failed, for a failure found outside the stream; nil when it
// already ended.
func (s *Stream) Fail(message, code string) []byte {
	if s.done {
		return nil
	}
	s.out = s.out[:0]
	s.fail(message, &code, nil)
	return s.taken()
}

// taken is a copy of the events written since the last Feed or Fail.
func (s *Stream) taken() []byte {
	out := append([]byte(nil), s.out...)
	s.out = reusable(s.out)
	return out
}

// reusable keeps an output buffer for the next chunk unless a large event
// grew it, which the stream should not hold on to.
func reusable(b []byte) []byte {
	if cap(b) > 64<<10 {
		return nil
	}
	return b[:0]
}

func (s *Stream) chatEvent(data []byte) {
	if bytes.Equal(data, []byte("[DONE]")) {
		s.complete()
		return
	}
	if !s.plainChunk(data) {
		s.decodedChunk(data)
	}
}

// decodedChunk handles any chat chunk, decoded whole: what plainChunk
// leaves.
func (s *Stream) decodedChunk(data []byte) {
	var c chatEvent
	if json.Unmarshal(data, &c) != nil {
		// The chat translators emit valid chunks; one that does not
		// decode (a count beyond int) ends the response, as a broken
		// stream does, rather than vanish.
		s.failServer("The provider sent a stream chunk the gateway cannot read.")
		return
	}
	if e := c.Error; e != nil {
		// The event has no type member: a code the chat error lacks is
		// its type (server_error, rate_limit_error, ...).
		code := e.Code
		if code == nil && e.Type != "" {
			code = &e.Type
		}
		s.fail(e.Message, code, e.Param)
		return
	}
	s.start()
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		s.delta(ch.Delta)
		if ch.FinishReason != nil {
			s.finish = *ch.FinishReason
		}
	}
}

// delta acts on what a decoded chunk's delta adds: reasoning, text, a
// refusal's text, tool calls (plainChunk acts on what it takes in the same
// order, and leaves refusals here).
func (s *Stream) delta(d api.Delta) {
	if d.ReasoningContent != "" {
		s.reason([]byte(d.ReasoningContent))
	}
	if len(d.ThinkingBlocks) > 0 {
		s.reason(nil)
		s.reasoning.blocks = append(s.reasoning.blocks, d.ThinkingBlocks...)
	}
	if d.Content != nil && *d.Content != "" {
		s.textDelta([]byte(*d.Content))
	}
	if d.Refusal != nil && *d.Refusal != "" {
		s.refusalDelta(*d.Refusal)
	}
	for _, tc := range d.ToolCalls {
		index := 0 // the chat translators always number the pieces
		if tc.Index != nil {
			index = *tc.Index
		}
		it := s.calls[index]
		if it == nil {
			it = s.openCall(index, tc.ID, tc.Function.Name)
		}
		if tc.Function.Arguments != "" {
			s.argumentsDelta(it, []byte(tc.Function.Arguments))
		}
	}
}

func (s *Stream) emit(typ string, fields map[string]any) {
	fields["type"], fields["sequence_number"] = typ, s.seq
	s.seq++
	b, err := json.Marshal(fields)
	if err != nil { // cannot happen: plain values only
		panic(err)
	}
	s.out = sse.AppendEvent(s.out, typ, b)
}

func (s *Stream) start() {
	if s.started {
		return
	}
	s.started = true
	resp := s.response("in_progress", nil)
	s.emit("response.created", map[string]any{"response": resp})
	s.emit("response.in_progress", map[string]any{"response": resp})
}

// response is the Response object as the stream stands.
func (s *Stream) response(status string, details any) map[string]any {
	r := skeleton(s.req, s.id, s.created)
	r["status"], r["incomplete_details"] = status, details
	out := []any{}
	for _, it := range s.items {
		out = append(out, it.item("completed"))
	}
	r["output"] = out
	if status != "in_progress" {
		var writes int64
		if s.cacheWrites != nil {
			writes = s.cacheWrites()
		}
		r["usage"] = responsesUsage(s.usage, writes)
	}
	return r
}

func (s *Stream) newItem(kind, id string) *outItem {
	it := &outItem{kind: kind, index: len(s.items), id: id, idJSON: mustJSON(id)}
	s.items = append(s.items, it)
	return it
}

func (s *Stream) reason(text []byte) {
	if s.reasoning == nil {
		s.reasoning = s.newItem("reasoning", outputID("rs_", s.id, -1))
		s.emit("response.output_item.added", map[string]any{"output_index": s.reasoning.index,
			"item": map[string]any{"type": "reasoning", "id": s.reasoning.id, "summary": []any{}}})
		s.emit("response.reasoning_summary_part.added", map[string]any{"output_index": s.reasoning.index,
			"item_id": s.reasoning.id, "summary_index": 0, "part": summaryPart("")})
	}
	if len(text) > 0 {
		s.reasoning.text.Write(text)
		s.emitDelta(reasoningDeltaEvent, s.reasoning, text)
	}
}

func summaryPart(text string) map[string]any {
	return map[string]any{"type": "summary_text", "text": text}
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// openCall opens the tool call item of chat tool call index, which the
// call's first piece names.
func (s *Stream) openCall(index int, callID, name string) *outItem {
	t := s.req.tools.call(name)
	it := s.newItem("function_call", callItemID(t, s.id, index))
	it.callID, it.tool = callID, t
	s.calls[index] = it
	s.emit("response.output_item.added", map[string]any{"output_index": it.index, "item": it.item("in_progress")})
	return it
}

// argumentsDelta adds a piece of a function call's arguments. A custom
// tool's input is inside its function's arguments, a JSON string that
// pieces cut anywhere: it goes out whole when the call is complete.
func (s *Stream) argumentsDelta(it *outItem, args []byte) {
	it.text.Write(args)
	if it.tool.kind != customTool {
		s.emitDelta(argumentsDeltaEvent, it, args)
	}
}

// deltaEvent is the shape of a delta event as json.Marshal writes its
// members, sorted by name: head before "delta", mid between item_id and
// output_index, tail between sequence_number and type.
type deltaEvent struct{ typ, head, mid, tail string }

var (
	textDeltaEvent      = deltaEvent{typ: "response.output_text.delta", head: `"content_index":0,`, mid: `,"logprobs":[]`}
	reasoningDeltaEvent = deltaEvent{typ: "response.reasoning_summary_text.delta", tail: `,"summary_index":0`}
	argumentsDeltaEvent = deltaEvent{typ: "response.function_call_arguments.delta"}
)

// emitDelta appends a delta event of item it, the bulk of a stream,
// written directly rather than through emit's map and json.Marshal, to
// the same bytes. The JSON holds no line break, so it is the one data:
// line sse.AppendEvent would write.
func (s *Stream) emitDelta(e deltaEvent, it *outItem, delta []byte) {
	b := append(s.out, "event: "...)
	b = append(b, e.typ...)
	b = append(b, "\ndata: {"...)
	b = append(b, e.head...)
	b = append(b, `"delta":`...)
	b = jsonscan.AppendQuoted(b, delta)
	b = append(b, `,"item_id":`...)
	b = append(b, it.idJSON...)
	b = append(b, e.mid...)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(it.index), 10)
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(s.seq), 10)
	b = append(b, e.tail...)
	b = append(b, `,"type":"`...)
	b = append(b, e.typ...)
	s.out = append(b, "\"}\n\n"...)
	s.seq++
}

// item renders an output item.
func (it *outItem) item(status string) map[string]any {
	switch it.kind {
	case "function_call":
		return callItem(it.tool, it.id, it.callID, it.text.String(), status)
	case "reasoning":
		item := reasoningItem(it.id, it.text.String(), it.blocks)
		if it.text.Len() == 0 {
			item["summary"] = []any{summaryPart("")} // as the part the stream added
		}
		return item
	}
	return it.messageItem(status)
}

// complete closes every item and the response.
func (s *Stream) complete() {
	s.done = true
	s.start()
	for _, it := range s.items {
		s.closeItem(it)
	}
	status, details := statusOf(s.finish)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	s.emit(typ, map[string]any{"response": s.response(status, details)})
}

func (s *Stream) closeItem(it *outItem) {
	switch it.kind {
	case "message":
		s.closeParts(it)
	case "reasoning":
		s.emit("response.reasoning_summary_text.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"summary_index": 0, "text": it.text.String()})
		s.emit("response.reasoning_summary_part.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"summary_index": 0, "part": summaryPart(it.text.String())})
	case "function_call":
		if it.tool.kind == customTool {
			input := customInput(it.text.String())
			s.emit("response.custom_tool_call_input.delta", map[string]any{"output_index": it.index, "item_id": it.id, "delta": input})
			s.emit("response.custom_tool_call_input.done", map[string]any{"output_index": it.index, "item_id": it.id, "input": input})
			break
		}
		s.emit("response.function_call_arguments.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"name": it.tool.name, "arguments": it.text.String()})
	}
	s.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": it.item("completed")})
}

// fail ends the stream with an error event and response.failed: clients
// that ignore error events (Codex) end on the latter.
func (s *Stream) fail(message string, code, param *string) {
	s.done, s.failed = true, true
	s.emit("error", map[string]any{"message": message, "code": code, "param": param})
	r := s.response("failed", nil)
	r["error"] = failedError(code, message)
	s.emit("response.failed", map[string]any{"response": r})
}

// failedError is a failed Response's error: its code one the schema's
// ResponseErrorCode has (a rate limit's, else server_error).
func failedError(code *string, message string) map[string]any {
	c := "server_error"
	if code != nil && (*code == "rate_limit_exceeded" || *code == "rate_limit_error") {
		c = "rate_limit_exceeded"
	}
	return map[string]any{"code": c, "message": message}
}

// failServer ends the stream with a server_error event.
func (s *Stream) failServer(msg string) {
	code := "server_error"
	s.fail(msg, &code, nil)
}

// Usage is u as a Responses answer states it.
func Usage(u translate.Usage) map[string]any {
	return responsesUsage(api.ChatUsage(u), u.CacheWriteTokens)
}

// responsesUsage maps chat usage to Responses usage, with the cached and
// reasoning tokens and writes, the prompt tokens written to the provider's
// cache (which chat usage has no place for); nil (no usage reported)
// counts zero.
func responsesUsage(u *api.Usage, writes int64) map[string]any {
	if u == nil {
		u = &api.Usage{}
	}
	return map[string]any{"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.PromptTokensDetails.CachedTokens, "cache_write_tokens": writes},
		"output_tokens_details": map[string]any{"reasoning_tokens": u.CompletionTokensDetails.ReasoningTokens}}
}
