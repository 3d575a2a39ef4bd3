package responses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"modelgate/translate/api"
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

	started   bool
	model     string
	items     []*outItem // in output order
	text      *outItem   // the open message item
	reasoning *outItem
	calls     map[int]*outItem // by chat tool call index
	finish    string
	usage     *api.Usage
	done      bool
	failed    bool
}

// outItem is an output item being streamed.
type outItem struct {
	kind   string // message, function_call, reasoning
	index  int
	id     string
	callID string
	name   string
	text   strings.Builder
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
	return append([]byte(nil), s.out...)
}

func (s *Stream) chatEvent(data []byte) {
	if bytes.Equal(data, []byte("[DONE]")) {
		s.complete()
		return
	}
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
	s.start(c.Model)
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		d := ch.Delta
		if d.ReasoningContent != "" {
			s.reason(d.ReasoningContent)
		}
		if d.Content != nil && *d.Content != "" {
			s.textDelta(*d.Content)
		}
		for _, tc := range d.ToolCalls {
			index := 0 // the chat translators always number the pieces
			if tc.Index != nil {
				index = *tc.Index
			}
			s.callDelta(index, tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
		if ch.FinishReason != nil {
			s.finish = *ch.FinishReason
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

func (s *Stream) start(model string) {
	if s.started {
		return
	}
	s.started, s.model = true, model
	resp := s.response("in_progress", nil)
	s.emit("response.created", map[string]any{"response": resp})
	s.emit("response.in_progress", map[string]any{"response": resp})
}

// response is the Response object as the stream stands.
func (s *Stream) response(status string, details any) map[string]any {
	r := skeleton(s.req, s.id, s.created)
	r["model"], r["status"], r["incomplete_details"] = s.model, status, details
	out := []any{}
	for _, it := range s.items {
		out = append(out, it.item("completed"))
	}
	r["output"] = out
	if status != "in_progress" {
		r["usage"] = responsesUsage(s.usage)
	}
	return r
}

func (s *Stream) newItem(kind, id string) *outItem {
	it := &outItem{kind: kind, index: len(s.items), id: id}
	s.items = append(s.items, it)
	return it
}

func (s *Stream) reason(text string) {
	if s.reasoning == nil {
		s.reasoning = s.newItem("reasoning", "rs_"+strings.TrimPrefix(s.id, "resp_"))
		s.emit("response.output_item.added", map[string]any{"output_index": s.reasoning.index,
			"item": map[string]any{"type": "reasoning", "id": s.reasoning.id, "summary": []any{}}})
		s.emit("response.reasoning_summary_part.added", map[string]any{"output_index": s.reasoning.index,
			"item_id": s.reasoning.id, "summary_index": 0, "part": summaryPart("")})
	}
	s.reasoning.text.WriteString(text)
	s.emit("response.reasoning_summary_text.delta", map[string]any{"output_index": s.reasoning.index,
		"item_id": s.reasoning.id, "summary_index": 0, "delta": text})
}

func summaryPart(text string) map[string]any {
	return map[string]any{"type": "summary_text", "text": text}
}

func (s *Stream) textDelta(delta string) {
	if s.text == nil {
		s.text = s.newItem("message", "msg_"+strings.TrimPrefix(s.id, "resp_"))
		s.emit("response.output_item.added", map[string]any{"output_index": s.text.index,
			"item": map[string]any{"type": "message", "id": s.text.id, "status": "in_progress", "role": "assistant", "content": []any{}}})
		s.emit("response.content_part.added", map[string]any{"output_index": s.text.index, "item_id": s.text.id,
			"content_index": 0, "part": textPart("")})
	}
	s.text.text.WriteString(delta)
	s.emit("response.output_text.delta", map[string]any{"output_index": s.text.index, "item_id": s.text.id,
		"content_index": 0, "delta": delta, "logprobs": []any{}})
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func (s *Stream) callDelta(index int, callID, name, args string) {
	it, ok := s.calls[index]
	if !ok {
		it = s.newItem("function_call", "fc_"+strings.TrimPrefix(s.id, "resp_")+"_"+strconv.Itoa(index))
		it.callID, it.name = callID, name
		s.calls[index] = it
		s.emit("response.output_item.added", map[string]any{"output_index": it.index, "item": it.item("in_progress")})
	}
	if args != "" {
		it.text.WriteString(args)
		s.emit("response.function_call_arguments.delta", map[string]any{"output_index": it.index, "item_id": it.id, "delta": args})
	}
}

// item renders an output item.
func (it *outItem) item(status string) map[string]any {
	switch it.kind {
	case "function_call":
		return map[string]any{"type": "function_call", "id": it.id, "call_id": it.callID, "name": it.name,
			"arguments": it.text.String(), "status": status}
	case "reasoning":
		return map[string]any{"type": "reasoning", "id": it.id, "summary": []any{summaryPart(it.text.String())}}
	}
	return map[string]any{"type": "message", "id": it.id, "status": status, "role": "assistant",
		"content": []any{textPart(it.text.String())}}
}

// complete closes every item and the response.
func (s *Stream) complete() {
	s.done = true
	s.start(s.model)
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
		s.emit("response.output_text.done", map[string]any{"output_index": it.index, "item_id": it.id, "content_index": 0,
			"text": it.text.String(), "logprobs": []any{}})
		s.emit("response.content_part.done", map[string]any{"output_index": it.index, "item_id": it.id, "content_index": 0,
			"part": textPart(it.text.String())})
	case "reasoning":
		s.emit("response.reasoning_summary_text.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"summary_index": 0, "text": it.text.String()})
		s.emit("response.reasoning_summary_part.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"summary_index": 0, "part": summaryPart(it.text.String())})
	case "function_call":
		s.emit("response.function_call_arguments.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"name": it.name, "arguments": it.text.String()})
	}
	s.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": it.item("completed")})
}

// fail ends the stream with an error event.
func (s *Stream) fail(message string, code, param *string) {
	s.done, s.failed = true, true
	s.emit("error", map[string]any{"message": message, "code": code, "param": param})
}

// failServer ends the stream with a server_error event.
func (s *Stream) failServer(msg string) {
	code := "server_error"
	s.fail(msg, &code, nil)
}

// responsesUsage maps chat usage to Responses usage, with the cached and
// reasoning tokens; nil (no usage reported) counts zero.
func responsesUsage(u *api.Usage) map[string]any {
	if u == nil {
		u = &api.Usage{}
	}
	return map[string]any{"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.PromptTokensDetails.CachedTokens, "cache_write_tokens": 0},
		"output_tokens_details": map[string]any{"reasoning_tokens": u.CompletionTokensDetails.ReasoningTokens}}
}
