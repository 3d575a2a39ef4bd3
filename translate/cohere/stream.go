package cohere

import (
	"encoding/json"

	"modelgate/translate/api"
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
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: openai.StreamEventTooLarge}))
	}
	if endOfStream && !c.done {
		c.done = true
		out = sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	return out
}

func (c *chat) event(out, data []byte) []byte {
	var ev eventIn
	if err := json.Unmarshal(data, &ev); err != nil {
		c.done = true
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: "The provider sent a stream event that is not JSON."}))
	}
	switch ev.Type {
	case "message-start":
		c.id = ev.ID
		empty := ""
		return c.emit(out, api.Delta{Role: "assistant", Content: &empty}, nil)
	case "content-delta":
		var cd contentDelta
		json.Unmarshal(ev.Delta.Message.Content, &cd) //nolint:errcheck // a malformed delta carries no text
		return c.emit(out, api.Delta{Content: &cd.Text}, nil)
	case "tool-call-start", "tool-call-delta":
		return c.toolCall(out, ev)
	case "message-end":
		return c.end(out, ev)
	}
	return out // content-start/end, tool-plan-delta, tool-call-end, citations
}

// toolCall starts a tool call or continues its arguments.
func (c *chat) toolCall(out []byte, ev eventIn) []byte {
	var td toolCallDelta
	json.Unmarshal(ev.Delta.Message.ToolCalls, &td) //nolint:errcheck // a malformed delta carries nothing
	var tc api.ToolCall
	if ev.Type == "tool-call-start" {
		c.calls++
		tc.ID, tc.Type, tc.Function.Name = td.ID, "function", td.Function.Name
	}
	idx := max(c.calls-1, 0)
	tc.Index, tc.Function.Arguments = &idx, td.Function.Arguments
	return c.emit(out, api.Delta{ToolCalls: []api.ToolCall{tc}}, nil)
}

func (c *chat) end(out []byte, ev eventIn) []byte {
	c.done = true
	if ev.Delta.Error != "" {
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

func (c *chat) chunks() api.ChunkWriter {
	return api.ChunkWriter{ID: c.id, Model: c.target.Model, Created: c.created}
}

func (c *chat) emit(out []byte, d api.Delta, finish *string) []byte {
	return c.chunks().Delta(out, d, finish)
}
