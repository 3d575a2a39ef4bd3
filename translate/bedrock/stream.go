package bedrock

import (
	"encoding/json"

	"modelgate/translate/api"
	"modelgate/translate/sse"
)

type streamEvent struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
	Start             struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
			Type      string `json:"type"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta struct {
		Text    *string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
		ReasoningContent *struct {
			Text            string `json:"text"`
			Signature       string `json:"signature"`
			RedactedContent string `json:"redactedContent"`
		} `json:"reasoningContent"`
	} `json:"delta"`
	StopReason string   `json:"stopReason"`
	Usage      *usageIn `json:"usage"`
	Message    string   `json:"message"`
}

// streamChunk decodes event-stream frames and emits SSE. The usage arrives
// in a metadata event after messageStop, so the stream is completed at its
// end: the usage chunk if asked for, then [DONE].
func (c *chat) streamChunk(chunk []byte, endOfStream bool) []byte {
	var out []byte
	err := c.dec.each(chunk, func(f rawFrame) {
		if !c.done {
			out = c.frame(out, f)
		}
	})
	if err != nil && !c.done {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: "The provider's event stream is corrupt."}))
	}
	if !endOfStream || c.done {
		return out
	}
	c.done = true
	if !c.stopped || c.dec.Pending() {
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	if c.req.IncludeUsage {
		out = c.chunks().Usage(out, c.usage)
	}
	return append(out, api.DoneEvent...)
}

func (c *chat) frame(out []byte, f rawFrame) []byte {
	if string(f.header(":message-type")) != "exception" && string(f.header(":event-type")) == "contentBlockDelta" {
		if out, ok := c.fastDelta(out, f.payload); ok {
			return out
		}
	}
	return c.decodedFrame(out, f)
}

// decodedFrame translates any frame, decoding its payload in full.
func (c *chat) decodedFrame(out []byte, f rawFrame) []byte {
	var ev streamEvent
	if err := json.Unmarshal(f.payload, &ev); err != nil {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: "The provider sent an event that is not JSON."}))
	}
	if string(f.header(":message-type")) == "exception" {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		code := string(f.header(":exception-type"))
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: exceptionType(code), Message: ev.Message, Code: &code}))
	}
	switch string(f.header(":event-type")) {
	case "messageStart":
		empty := ""
		return c.emit(out, api.Delta{Role: "assistant", Content: &empty}, nil)
	case "contentBlockStop":
		return c.blockStop(out, ev)
	case "contentBlockStart":
		return c.blockStart(out, ev)
	case "contentBlockDelta":
		return c.blockDelta(out, ev)
	case "messageStop":
		c.stopped = true
		reason := c.finishReason(ev.StopReason, len(c.tools) > 0)
		return c.emit(out, api.Delta{}, &reason)
	case "metadata":
		if ev.Usage != nil {
			c.usage = ev.Usage.normalize()
		}
	}
	return out
}

func exceptionType(code string) string {
	switch code {
	case "throttlingException":
		return "rate_limit_error"
	case "validationException":
		return "invalid_request_error"
	}
	return "server_error"
}

func (c *chat) blockStart(out []byte, ev streamEvent) []byte {
	tu := ev.Start.ToolUse
	if tu == nil || tu.Type == serverToolUse { // one Bedrock runs: its input deltas go nowhere
		return out
	}
	if c.jsonMode && tu.Name == jsonTool {
		c.jsonBlock = ev.ContentBlockIndex + 1
		return out
	}
	if c.tools == nil {
		c.tools = map[int]int{}
	}
	idx := len(c.tools)
	c.tools[ev.ContentBlockIndex] = idx
	tc := api.ToolCall{Index: &idx, ID: tu.ToolUseID, Type: "function"}
	tc.Function.Name = tu.Name
	return c.emit(out, api.Delta{ToolCalls: []api.ToolCall{tc}}, nil)
}

func (c *chat) blockDelta(out []byte, ev streamEvent) []byte {
	d := ev.Delta
	switch {
	case d.Text != nil:
		return c.emit(out, api.Delta{Content: d.Text}, nil)
	case d.ReasoningContent != nil && d.ReasoningContent.RedactedContent != "":
		return c.emit(out, api.Delta{ThinkingBlocks: []api.ThinkingBlock{{Type: "redacted_thinking", Data: d.ReasoningContent.RedactedContent}}}, nil)
	case d.ReasoningContent != nil:
		c.thinking.Sign(ev.ContentBlockIndex, d.ReasoningContent.Signature)
		if d.ReasoningContent.Text == "" {
			return out
		}
		c.thinking.Text(ev.ContentBlockIndex, []byte(d.ReasoningContent.Text))
		return c.emit(out, api.Delta{ReasoningContent: d.ReasoningContent.Text}, nil)
	case d.ToolUse != nil && c.jsonBlock == ev.ContentBlockIndex+1:
		return c.emit(out, api.Delta{Content: &d.ToolUse.Input}, nil)
	case d.ToolUse != nil:
		idx, ok := c.tools[ev.ContentBlockIndex]
		if !ok {
			return out
		}
		tc := api.ToolCall{Index: &idx}
		tc.Function.Arguments = d.ToolUse.Input
		return c.emit(out, api.Delta{ToolCalls: []api.ToolCall{tc}}, nil)
	}
	return out
}

// chunks writes the stream's chunks, which name the model the client
// asked for, not Bedrock's id for it: clients compare the two.
func (c *chat) chunks() api.ChunkWriter {
	return api.ChunkWriter{ID: c.id, Model: c.req.Model, Created: c.created}
}

func (c *chat) emit(out []byte, d api.Delta, finish *string) []byte {
	return c.chunks().Delta(out, d, finish)
}

// blockStop sends a reasoning block whole, with its signature, when it
// stops: the client sends it back so (api.ThinkingBlock).
func (c *chat) blockStop(out []byte, ev streamEvent) []byte {
	t, ok := c.thinking.End(ev.ContentBlockIndex)
	if !ok {
		return out
	}
	return c.emit(out, api.Delta{ThinkingBlocks: []api.ThinkingBlock{t}}, nil)
}
