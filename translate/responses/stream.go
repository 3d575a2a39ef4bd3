package responses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

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
	usage     json.RawMessage
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

type chunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error json.RawMessage `json:"error"`
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
	var c chunk
	if json.Unmarshal(data, &c) != nil {
		// The chat translators emit valid chunks; one that does not
		// decode (a count beyond int) ends the response, as a broken
		// stream does, rather than vanish.
		s.failServer("The provider sent a stream chunk the gateway cannot read.")
		return
	}
	if len(c.Error) > 0 {
		s.fail(c.Error)
		return
	}
	s.start(c.Model)
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
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
			s.callDelta(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
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
	}
	s.reasoning.text.WriteString(text)
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
		return map[string]any{"type": "reasoning", "id": it.id,
			"summary": []any{map[string]any{"type": "summary_text", "text": it.text.String()}}}
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
	case "function_call":
		s.emit("response.function_call_arguments.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"name": it.name, "arguments": it.text.String()})
	}
	s.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": it.item("completed")})
}

// fail ends the stream with an error event.
func (s *Stream) fail(errJSON json.RawMessage) {
	s.done, s.failed = true, true
	var e struct {
		Message string  `json:"message"`
		Code    *string `json:"code"`
		Param   *string `json:"param"`
	}
	json.Unmarshal(errJSON, &e) //nolint:errcheck // the chat translator wrote it
	s.emit("error", map[string]any{"message": e.Message, "code": e.Code, "param": e.Param})
}

// failServer ends the stream with a server_error event.
func (s *Stream) failServer(msg string) {
	s.fail(mustJSON(map[string]string{"message": msg, "code": "server_error"}))
}

// responsesUsage maps chat usage to Responses usage.
func responsesUsage(raw json.RawMessage) map[string]any {
	var u struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	json.Unmarshal(raw, &u) //nolint:errcheck // absent usage counts zero
	return map[string]any{"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.PromptTokensDetails.CachedTokens, "cache_write_tokens": 0},
		"output_tokens_details": map[string]any{"reasoning_tokens": u.CompletionTokensDetails.ReasoningTokens}}
}
