package gemini

import (
	"encoding/json"

	"modelgate/translate/api"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

// streamState is what a stream translation remembers.
type streamState struct {
	id, model string
	started   bool
	calls     int  // tool calls so far, for their index
	finished  bool // a candidate reported a finishReason
	done      bool
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
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: openai.StreamEventTooLarge}))
	}
	if !endOfStream || c.st.done {
		return out
	}
	c.st.done = true
	if !c.st.finished || c.dec.Pending() {
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	if c.req.IncludeUsage {
		out = c.chunks().Usage(out, c.usage)
	}
	return append(out, api.DoneEvent...)
}

func (c *chat) event(out, data []byte) []byte {
	var r responseIn
	if err := json.Unmarshal(data, &r); err != nil {
		c.st.done = true
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider sent a stream event that is not JSON."}))
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		c.st.done = true
		return sse.AppendData(out, errorBody(500, data))
	}
	if !c.st.started {
		c.st.started, c.st.id, c.st.model = true, r.ResponseID, r.ModelVersion
	}
	if u, ok := r.usage(); ok {
		c.usage = u
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

func (c *chat) chunks() api.ChunkWriter {
	return api.ChunkWriter{ID: c.st.id, Model: c.st.model, Created: c.created}
}
