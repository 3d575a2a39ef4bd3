package messages

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/sse"
)

// bridge serves a Messages request through a provider's chat translator:
// the request goes as ToChat makes it, and the translator's answer (a
// chat completion, its chunks, or an OpenAI error) becomes the Messages
// API's message, events or error.
type bridge struct {
	report  translate.Output // what the last ResponseBody returned
	chat    translate.Translator
	req     *api.MessagesRequest
	warning string
	id      string
	status  int
	stream  bool
	dec     sse.Decoder
	st      streamState
}

// streamState is what the translation of a stream remembers between
// chunks.
type streamState struct {
	started bool
	ended   bool
	open    int    // the open content block's index, -1 for none
	kind    string // the open block's type
	next    int    // the next block's index
	tools   map[int]int
	stop    string
	refused bool // the chat answer refused: stop_reason refusal
}

// NewBridge returns the translator of a Messages request to a provider
// through its chat translator, made by chat.
func NewBridge(chat func(translate.Target, *api.ChatRequest) translate.Translator, t translate.Target, r *api.MessagesRequest) (translate.Translator, error) {
	req, warning, err := ToChat(r)
	if err != nil {
		return nil, err
	}
	var id [12]byte
	rand.Read(id[:]) //nolint:errcheck // crypto/rand.Read never fails
	return &bridge{chat: chat(t, req), req: r, warning: warning, id: "msg_" + hex.EncodeToString(id[:]),
		st: streamState{open: -1, tools: map[int]int{}}}, nil
}

// RequestBody implements translate.Translator.
func (b *bridge) RequestBody() (translate.Upstream, error) { return b.chat.RequestBody() }

// MaxOutputTokens implements translate.OutputBound.
func (b *bridge) MaxOutputTokens() int64 { return translate.MaxOutputTokens(b.chat) }

// Usage implements translate.Translator.
func (b *bridge) Usage() translate.Usage { return b.chat.Usage() }

// ResponseHeaders implements translate.Translator.
func (b *bridge) ResponseHeaders(status int, contentType string) translate.Head {
	h := b.chat.ResponseHeaders(status, contentType)
	b.status, b.stream = h.Status, h.Stream
	if b.warning != "" && h.Warning == "" {
		h.Warning = b.warning
	}
	if h.Stream {
		h.ContentType = "text/event-stream; charset=utf-8"
	}
	return h
}

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (b *bridge) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := b.responseBody(chunk, endOfStream)
	b.report.Later(translate.Messages, out, b.status, b.stream)
	return out, err
}

// Output implements translate.Reporter.
func (b *bridge) Output() *translate.Output { return b.report.Scanned() }

// responseBody implements translate.Translator.
func (b *bridge) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := b.chat.ResponseBody(chunk, endOfStream)
	if err != nil {
		return nil, err
	}
	switch {
	case b.status >= http.StatusBadRequest:
		return errorBody(b.status, out), nil
	case !b.stream:
		return b.message(out)
	}
	var events []byte
	for _, ev := range b.dec.Feed(out) {
		events = b.event(events, ev.Data)
	}
	if endOfStream && !b.st.ended {
		events = b.finish(events)
	}
	return events, nil
}

// FailStream implements translate.StreamFailer: the Messages API's error
// event.
func (b *bridge) FailStream(message, _ string) []byte {
	if !b.stream || b.st.ended {
		return nil
	}
	b.st.ended = true
	return api.MessagesErrorEvent(nil, "api_error", message)
}

// stopReasons are the Messages API's stop reasons of chat's finish
// reasons.
var stopReasons = map[string]string{"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
	"function_call": "tool_use", "content_filter": "refusal"}

// stopReason is the Messages API's stop reason of a chat answer that
// ended with finish. A refusal is stop_reason refusal, Anthropic's for a
// declined request, whatever the finish reason (OpenAI ends one with
// stop): a client must not take its text for an answer.
func stopReason(finish string, refused bool) string {
	if refused {
		return "refusal"
	}
	if r, ok := stopReasons[finish]; ok {
		return r
	}
	return "end_turn"
}

// usageJSON is the Messages API's usage of u: input_tokens leave out the
// cache reads and writes, which have their own counts.
type usageJSON struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

func usageOf(u translate.Usage) usageJSON {
	return usageJSON{InputTokens: max(0, u.PromptTokens-u.CachedTokens-u.CacheWriteTokens), CacheCreationInputTokens: u.CacheWriteTokens,
		CacheReadInputTokens: u.CachedTokens, OutputTokens: u.CompletionTokens}
}

// message is the Messages API's message of a chat completion.
func (b *bridge) message(out []byte) ([]byte, error) {
	var cc api.ChatCompletion
	if err := json.Unmarshal(out, &cc); err != nil || len(cc.Choices) == 0 {
		return nil, api.Unusable("the provider's chat completion has no choice to answer with")
	}
	m := cc.Choices[0].Message
	content := []map[string]any{}
	switch {
	case len(m.ThinkingBlocks) > 0:
		for _, t := range m.ThinkingBlocks {
			if t.Type == "redacted_thinking" {
				content = append(content, map[string]any{"type": "redacted_thinking", "data": t.Data})
			} else {
				content = append(content, map[string]any{"type": "thinking", "thinking": t.Thinking, "signature": t.Signature})
			}
		}
	case m.ReasoningContent != "":
		content = append(content, map[string]any{"type": "thinking", "thinking": m.ReasoningContent, "signature": ""})
	}
	if m.Content != nil && *m.Content != "" {
		content = append(content, map[string]any{"type": "text", "text": *m.Content})
	}
	// The Messages API has no refusal block: Anthropic's refusals are the
	// text written so far and stop_reason refusal.
	refused := m.Refusal != nil && *m.Refusal != ""
	if refused {
		content = append(content, map[string]any{"type": "text", "text": *m.Refusal})
	}
	for _, c := range m.ToolCalls {
		input := json.RawMessage(c.Function.Arguments)
		if !json.Valid(input) || len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		}
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Function.Name, "input": input})
	}
	return json.Marshal(map[string]any{"id": b.id, "type": "message", "role": "assistant", "model": b.req.Model,
		"content": content, "stop_reason": stopReason(cc.Choices[0].FinishReason, refused), "stop_sequence": nil, "usage": usageOf(b.chat.Usage())})
}

// event translates one chat stream event into Messages events.
func (b *bridge) event(out, data []byte) []byte {
	if b.st.ended {
		return out
	}
	if string(data) == "[DONE]" {
		return b.finish(out)
	}
	var chunk struct {
		Choices []struct {
			Delta        api.Delta `json:"delta"`
			FinishReason *string   `json:"finish_reason"`
		} `json:"choices"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return out
	}
	if chunk.Error != nil {
		b.st.ended = true
		return api.MessagesErrorEvent(out, "api_error", chunk.Error.Message)
	}
	out = b.start(out)
	for _, c := range chunk.Choices {
		out = b.deltaEvents(out, c.Delta)
		if c.FinishReason != nil && *c.FinishReason != "" {
			b.st.stop = *c.FinishReason
		}
	}
	return out
}

// deltaEvents translates what a chunk's delta adds: thinking, text, a
// refusal's text (a text block of its own, as the message has it) and
// tool calls.
func (b *bridge) deltaEvents(out []byte, d api.Delta) []byte {
	if d.ReasoningContent != "" {
		out = b.openBlock(out, "thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""})
		out = b.delta(out, map[string]any{"type": "thinking_delta", "thinking": d.ReasoningContent})
	}
	for _, t := range d.ThinkingBlocks {
		out = b.thinkingBlock(out, t)
	}
	if d.Content != nil && *d.Content != "" {
		out = b.openBlock(out, "text", map[string]any{"type": "text", "text": ""})
		out = b.delta(out, map[string]any{"type": "text_delta", "text": *d.Content})
	}
	if d.Refusal != nil && *d.Refusal != "" {
		b.st.refused = true
		out = b.openBlock(out, "refusal", map[string]any{"type": "text", "text": ""})
		out = b.delta(out, map[string]any{"type": "text_delta", "text": *d.Refusal})
	}
	for _, tc := range d.ToolCalls {
		out = b.toolCall(out, tc)
	}
	return out
}

// start sends message_start once: the message with no content yet and,
// as its input tokens, the gateway's estimate of the request's (a token
// per four bytes): most providers report theirs only at the end, which
// message_delta carries.
func (b *bridge) start(out []byte) []byte {
	if b.st.started {
		return out
	}
	b.st.started = true
	return appendEvent(out, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": b.id, "type": "message", "role": "assistant", "model": b.req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usageJSON{InputTokens: int64(len(b.req.Body)+3) / 4}}})
}

// openBlock makes the open content block one of kind, closing another.
// kind is the block's type, but for a refusal's text block ("refusal"),
// which is not the answer's text.
func (b *bridge) openBlock(out []byte, kind string, first map[string]any) []byte {
	if b.st.open >= 0 && b.st.kind == kind && kind != "tool_use" {
		return out
	}
	out = b.closeBlock(out)
	b.st.open, b.st.kind = b.st.next, kind
	b.st.next++
	return appendEvent(out, "content_block_start", map[string]any{"type": "content_block_start", "index": b.st.open, "content_block": first})
}

func (b *bridge) closeBlock(out []byte) []byte {
	if b.st.open < 0 {
		return out
	}
	out = appendEvent(out, "content_block_stop", map[string]any{"type": "content_block_stop", "index": b.st.open})
	b.st.open = -1
	return out
}

func (b *bridge) delta(out []byte, d map[string]any) []byte {
	return appendEvent(out, "content_block_delta", map[string]any{"type": "content_block_delta", "index": b.st.open, "delta": d})
}

// thinkingBlock ends the thinking streamed so far with its signature, or
// sends a whole one (a redacted block, or thinking not streamed before).
func (b *bridge) thinkingBlock(out []byte, t api.ThinkingBlock) []byte {
	if t.Type == "redacted_thinking" {
		out = b.closeBlock(out)
		out = b.openBlock(out, "redacted_thinking", map[string]any{"type": "redacted_thinking", "data": t.Data})
		return b.closeBlock(out)
	}
	if b.st.open < 0 || b.st.kind != "thinking" {
		out = b.openBlock(out, "thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""})
		if t.Thinking != "" {
			out = b.delta(out, map[string]any{"type": "thinking_delta", "thinking": t.Thinking})
		}
	}
	if t.Signature != "" {
		out = b.delta(out, map[string]any{"type": "signature_delta", "signature": t.Signature})
	}
	return b.closeBlock(out)
}

// toolCall starts a tool_use block for a new call, and sends its
// arguments as they come.
func (b *bridge) toolCall(out []byte, tc api.ToolCall) []byte {
	index := 0
	if tc.Index != nil {
		index = *tc.Index
	}
	block, known := b.st.tools[index]
	if !known {
		out = b.openBlock(out, "tool_use", map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": map[string]any{}})
		block = b.st.open
		b.st.tools[index] = block
	}
	if tc.Function.Arguments == "" {
		return out
	}
	return appendEvent(out, "content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
		"delta": map[string]any{"type": "input_json_delta", "partial_json": tc.Function.Arguments}})
}

// finish ends the stream: the open block, message_delta with the stop
// reason and the usage, message_stop.
func (b *bridge) finish(out []byte) []byte {
	out = b.start(out)
	out = b.closeBlock(out)
	b.st.ended = true
	out = appendEvent(out, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(b.st.stop, b.st.refused), "stop_sequence": nil}, "usage": usageOf(b.chat.Usage())})
	return appendEvent(out, "message_stop", map[string]any{"type": "message_stop"})
}

// appendEvent appends an SSE event named typ with v as its data.
func appendEvent(out []byte, typ string, v any) []byte {
	data, _ := json.Marshal(v)
	out = append(out, "event: "...)
	out = append(out, typ...)
	out = append(out, "\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

// errorBody is an OpenAI error as the Messages API's, its type named by
// the status as Anthropic names them.
func errorBody(status int, out []byte) []byte {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(out, &e) != nil || e.Error.Message == "" {
		e.Error.Message = "The provider answered with an error."
	}
	return api.MessagesError(api.MessagesErrorType(status), e.Error.Message)
}

var _ translate.Reporter = (*bridge)(nil)
