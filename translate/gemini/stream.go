package gemini

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

// streamState is what a stream translation remembers; model is the
// modelVersion that answered, which bills web searches (chat.Usage).
type streamState struct {
	id, model string
	started   bool
	calls     int  // tool calls so far, for their index
	finished  bool // a candidate reported a finishReason
	done      bool

	head []byte       // the chunks' ChunkHead, once started
	ev   fastResponse // the event being read, reused
	args bytes.Buffer // a tool call's compacted arguments
}

// streamChunk translates the events a chunk completes. Gemini's streams
// end without a terminator: a stream is complete when a candidate gave a
// finishReason, and [DONE] is added at the end.
func (c *chat) streamChunk(chunk []byte, endOfStream bool) []byte {
	var out []byte
	for _, ev := range c.dec.Feed(chunk) {
		if !c.st.done {
			out = c.event(out, ev.Data)
		}
	}
	if c.dec.Err() != nil && !c.st.done {
		c.st.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: openai.StreamEventTooLarge}))
	}
	if !endOfStream || c.st.done {
		return out
	}
	c.st.done = true
	if !c.st.finished || c.dec.Pending() {
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	if c.req.IncludeUsage {
		out = c.chunks().Usage(out, c.usage)
	}
	return append(out, api.DoneEvent...)
}

// event translates one event. The events of every stream (text, thoughts
// and tool calls, with usage) are read in one pass and written by
// appending; what that reading does not expect (an error, nulls, keys
// spelled in another case, duplicate keys, deep nesting, malformed JSON)
// takes decodedEvent, whose encoding/json decoding decides as it always
// did.
func (c *chat) event(out, data []byte) []byte {
	ev := &c.st.ev
	defer ev.forget()
	if !ev.read(data) {
		return c.decodedEvent(out, data)
	}
	if !c.st.started {
		c.st.started, c.st.id, c.st.model = true, tokenString(ev.id), tokenString(ev.model)
	}
	if ev.hasUsage {
		c.usage = ev.usage
	}
	if len(ev.cands) == 0 {
		return out
	}
	if c.st.head == nil {
		c.st.head = c.chunks().ChunkHead()
	}
	if need := len(c.st.head) + ev.size(); cap(out)-len(out) < need {
		out = slices.Grow(out, need)
	}
	out = append(out, c.st.head...)
	for i := range ev.cands {
		if i > 0 {
			out = append(out, ',')
		}
		out = c.appendChoice(out, &ev.cands[i], ev.parts[ev.cands[i].from:ev.cands[i].to])
	}
	return append(out, api.ChunkTail...)
}

// appendChoice appends the chunk choice of one candidate, as deltas
// makes it.
func (c *chat) appendChoice(out []byte, cand *fastCandidate, parts []fastPart) []byte {
	var text, reasoning, calls bool
	for i := range parts {
		switch p := &parts[i]; {
		case p.call:
			calls = true
		case p.thought:
			reasoning = reasoning || len(p.text) > 2
		default:
			text = text || len(p.text) > 2
		}
	}
	out = append(out, `{"index":`...)
	out = strconv.AppendInt(out, int64(cand.index), 10)
	out = append(out, `,"delta":{"role":"assistant"`...)
	if text || !calls && !reasoning {
		out = append(out, `,"content":"`...)
		for i := range parts {
			if p := &parts[i]; !p.call && !p.thought {
				out = jsonscan.AppendTokenBody(out, p.text)
			}
		}
		out = append(out, '"')
	}
	if reasoning {
		out = append(out, `,"reasoning_content":"`...)
		for i := range parts {
			if p := &parts[i]; !p.call && p.thought {
				out = jsonscan.AppendTokenBody(out, p.text)
			}
		}
		out = append(out, '"')
	}
	if calls {
		out = append(out, `,"tool_calls":[`...)
		first := true
		for i := range parts {
			if p := &parts[i]; p.call {
				if !first {
					out = append(out, ',')
				}
				first = false
				out = c.appendToolCall(out, p)
			}
		}
		out = append(out, ']')
	}
	out = append(out, `},"finish_reason":`...)
	if len(cand.finish) <= 2 {
		return append(out, "null}"...)
	}
	c.st.finished = true
	out = append(out, '"')
	out = append(out, finishReason(tokenString(cand.finish), c.st.calls > 0)...)
	return append(out, `"}`...)
}

// appendToolCall appends the tool call toolCall makes of a part, with the
// next call index.
func (c *chat) appendToolCall(out []byte, p *fastPart) []byte {
	n := c.st.calls
	c.st.calls++
	out = append(out, `{"index":`...)
	out = strconv.AppendInt(out, int64(n), 10)
	out = append(out, `,"id":`...)
	switch {
	case len(p.signature) > 2:
		out = jsonscan.AppendQuoted(out, signatureID(tokenString(p.signature)))
	case len(p.id) > 2:
		out = append(out, '"')
		out = jsonscan.AppendTokenBody(out, p.id)
		out = append(out, '"')
	default:
		out = append(out, `"call_`...)
		out = strconv.AppendInt(out, int64(n), 10)
		out = append(out, '"')
	}
	out = append(out, `,"type":"function","function":{`...)
	if len(p.name) > 2 {
		out = append(out, `"name":"`...)
		out = jsonscan.AppendTokenBody(out, p.name)
		out = append(out, `",`...)
	}
	out = append(out, `"arguments":`...)
	if c.st.args.Cap() > 64<<10 { // let a large one go
		c.st.args = bytes.Buffer{}
	}
	c.st.args.Reset()
	if len(p.args) == 0 || json.Compact(&c.st.args, p.args) != nil {
		out = append(out, `"{}"`...)
	} else {
		out = jsonscan.AppendQuoted(out, c.st.args.Bytes())
	}
	return append(out, "}}"...)
}

// tokenString is the text of a JSON string token ("" for none).
func tokenString(tok []byte) string {
	var scratch []byte
	return string(jsonscan.Unquote(tok, &scratch))
}

// decodedEvent translates one event through encoding/json.
func (c *chat) decodedEvent(out, data []byte) []byte {
	var r responseIn
	if err := json.Unmarshal(data, &r); err != nil {
		c.st.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider sent a stream event that is not JSON."}))
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		c.st.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, errorBody(500, data))
	}
	if !c.st.started {
		c.st.started, c.st.id, c.st.model = true, r.ResponseID, r.ModelVersion
	}
	if u, ok := r.usage(); ok {
		c.usage = u
	}
	for _, cand := range r.Candidates {
		c.searches.add(cand.GroundingMetadata)
	}
	choices := c.deltas(r)
	if len(choices) == 0 {
		return out
	}
	return c.chunks().Chunk(out, api.ChatCompletionChunk{Choices: choices})
}

// deltas turns each candidate of one response into a chunk choice.
func (c *chat) deltas(r responseIn) []api.ChunkChoice {
	var out []api.ChunkChoice
	for _, cand := range r.Candidates {
		d := api.Delta{Role: "assistant"}
		text := ""
		for _, p := range cand.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				tc := toolCall(p.FunctionCall, p.ThoughtSignature, c.st.calls)
				idx := c.st.calls
				tc.Index = &idx
				c.st.calls++
				d.ToolCalls = append(d.ToolCalls, tc)
			case p.Thought:
				d.ReasoningContent += p.Text
			default:
				text += p.Text
			}
		}
		if text != "" || len(d.ToolCalls) == 0 && d.ReasoningContent == "" {
			d.Content = &text
		}
		ch := api.ChunkChoice{Index: cand.Index, Delta: d}
		if cand.FinishReason != "" {
			reason := finishReason(cand.FinishReason, c.st.calls > 0)
			ch.FinishReason = &reason
			c.st.finished = true
		}
		out = append(out, ch)
	}
	return out
}

// chunks writes the stream's chunks, which name the model the client
// asked for, not the modelVersion that answered: clients compare the two.
func (c *chat) chunks() api.ChunkWriter {
	return api.ChunkWriter{ID: c.st.id, Model: c.req.Model, Created: c.created}
}

// fastResponse is a GenerateContentResponse as read in one pass: string
// members are their tokens (quotes included, nil when absent), to be
// re-encoded straight into the chunk.
type fastResponse struct {
	cands     []fastCandidate
	parts     []fastPart // the candidates' parts, in order
	usage     translate.Usage
	hasUsage  bool
	id, model []byte
}

// size is about the room the choices of r take in a chunk, so that one
// allocation makes room for the usual chunk: its texts with some escapes.
func (r *fastResponse) size() int {
	choice := len(`{"index":,"delta":{"role":"assistant","content":"","reasoning_content":""},"finish_reason":"content_filter"},`) + 20
	n := len(api.ChunkTail) + len(r.cands)*choice
	for i := range r.parts {
		p := &r.parts[i]
		n += len(p.text) + len(p.text)/8
		if p.call {
			n += len(`{"index":,"id":"call_","type":"function","function":{"name":"","arguments":""}},`) + 40 +
				len(p.id) + len(p.name) + len(p.signature) + 2*len(p.args)
		}
	}
	return n
}

type fastCandidate struct {
	index    int
	finish   []byte
	from, to int // its parts
}

type fastPart struct {
	text, signature []byte
	thought         bool
	call            bool   // a functionCall, of:
	id, name, args  []byte // args is its raw JSON, nil when absent
}

// Member names of GenerateContentResponse and its parts, the ones
// responseIn decodes: any other spelling of them goes to encoding/json.
var (
	responseKeys = []string{"candidates", "usageMetadata", "modelVersion", "responseId", "error"}
	// groundingMetadata is not read here: an event with it, rare, is
	// decoded, which counts its searches.
	candidateKeys = []string{"content", "finishReason", "index", "groundingMetadata"}
	contentKeys   = []string{"parts"}
	partKeys      = []string{"text", "thought", "functionCall", "thoughtSignature"}
	callKeys      = []string{"id", "name", "args"}
	usageKeys     = []string{"promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount", "cachedContentTokenCount"}
)

// forget lets go of the event's text, keeping the room for the next.
func (r *fastResponse) forget() {
	clear(r.cands)
	clear(r.parts)
	*r = fastResponse{cands: r.cands[:0], parts: r.parts[:0]}
}

// read reads data in one pass; false if it must be decoded instead.
func (r *fastResponse) read(data []byte) bool {
	*r = fastResponse{cands: r.cands[:0], parts: r.parts[:0]}
	cur := jsonscan.NewCursor(data)
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "candidates":
			cur.Once(&seen, 1)
			for more := cur.FirstElem(); more; more = cur.NextElem() {
				r.candidate(&cur)
			}
		case "usageMetadata":
			cur.Once(&seen, 2)
			r.readUsage(&cur)
		case "modelVersion":
			cur.Once(&seen, 4)
			r.model = cur.StringToken()
		case "responseId":
			cur.Once(&seen, 8)
			r.id = cur.StringToken()
		default:
			cur.SkipUnknown(key, responseKeys)
		}
	}
	return cur.End()
}

func (r *fastResponse) candidate(cur *jsonscan.Cursor) {
	cand := fastCandidate{from: len(r.parts)}
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "content":
			cur.Once(&seen, 1)
			for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
				if string(key) != "parts" {
					cur.SkipUnknown(key, contentKeys)
					continue
				}
				cur.Once(&seen, 2)
				for more := cur.FirstElem(); more; more = cur.NextElem() {
					r.part(cur)
				}
			}
		case "finishReason":
			cur.Once(&seen, 4)
			cand.finish = cur.StringToken()
		case "index":
			cur.Once(&seen, 8)
			n := cur.Int()
			if cand.index = int(n); int64(cand.index) != n {
				cur.Fail()
			}
		default:
			cur.SkipUnknown(key, candidateKeys)
		}
	}
	cand.to = len(r.parts)
	r.cands = append(r.cands, cand)
}

func (r *fastResponse) part(cur *jsonscan.Cursor) {
	var p fastPart
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "text":
			cur.Once(&seen, 1)
			p.text = cur.StringToken()
		case "thought":
			cur.Once(&seen, 2)
			p.thought = cur.Bool()
		case "functionCall":
			cur.Once(&seen, 4)
			p.call = true
			r.functionCall(cur, &p)
		case "thoughtSignature":
			cur.Once(&seen, 8)
			p.signature = cur.StringToken()
		default:
			cur.SkipUnknown(key, partKeys)
		}
	}
	r.parts = append(r.parts, p)
}

func (r *fastResponse) functionCall(cur *jsonscan.Cursor, p *fastPart) {
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "id":
			cur.Once(&seen, 1)
			p.id = cur.StringToken()
		case "name":
			cur.Once(&seen, 2)
			p.name = cur.StringToken()
		case "args":
			cur.Once(&seen, 4)
			p.args = cur.Skip()
		default:
			cur.SkipUnknown(key, callKeys)
		}
	}
}

func (r *fastResponse) readUsage(cur *jsonscan.Cursor) {
	var m struct{ prompt, candidates, thoughts, total, cached int64 }
	var seen uint32
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "promptTokenCount":
			cur.Once(&seen, 1)
			m.prompt = cur.Int()
		case "candidatesTokenCount":
			cur.Once(&seen, 2)
			m.candidates = cur.Int()
		case "thoughtsTokenCount":
			cur.Once(&seen, 4)
			m.thoughts = cur.Int()
		case "totalTokenCount":
			cur.Once(&seen, 8)
			m.total = cur.Int()
		case "cachedContentTokenCount":
			cur.Once(&seen, 16)
			m.cached = cur.Int()
		default:
			cur.SkipUnknown(key, usageKeys)
		}
	}
	completion := m.candidates + m.thoughts
	r.usage = translate.Usage{PromptTokens: m.prompt, CompletionTokens: completion,
		TotalTokens: m.prompt + completion, CachedTokens: m.cached, ReasoningTokens: m.thoughts}
	r.hasUsage = true
}
