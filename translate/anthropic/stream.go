package anthropic

import (
	"encoding/json"

	"modelgate/translate/api"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

// streamState is what a stream translation remembers between events.
type streamState struct {
	id        string
	tools     map[int]int // Anthropic block index → OpenAI tool_calls index
	jsonBlock int         // the json_response tool's block index + 1, in jsonMode
	// thinking gathers the thinking block being streamed; it goes out
	// whole, signed, when the block ends.
	thinking api.ThinkingGatherer
	scratch  []byte // a decoded thinking delta, see jsonscan.Unquote
	done     bool
	deltas   api.DeltaChunks // writes the fast path's chunks
}

// eventIn is any Anthropic stream event, as far as the translator reads it.
type eventIn struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		ID    string  `json:"id"`
		Usage usageIn `json:"usage"`
	} `json:"message"`
	ContentBlock contentBlockIn `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usageIn        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// streamChunk translates the events a chunk completes.
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
	if endOfStream && !c.st.done {
		c.st.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		out = sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	return out
}

func (c *chat) event(out, data []byte) []byte {
	if out, ok := c.fastDelta(out, data); ok {
		return out
	}
	return c.decodedEvent(out, data)
}

// decodedEvent translates any event, decoding it in full.
func (c *chat) decodedEvent(out, data []byte) []byte {
	var ev eventIn
	if err := json.Unmarshal(data, &ev); err != nil {
		c.st.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider sent a stream event that is not JSON."}))
	}
	switch ev.Type {
	case "message_start":
		c.st.id = ev.Message.ID
		c.usage = ev.Message.Usage.normalize()
		empty := ""
		return c.emit(out, api.Delta{Role: "assistant", Content: &empty}, nil)
	case "content_block_start":
		return c.blockStart(out, ev)
	case "content_block_delta":
		return c.blockDelta(out, ev)
	case "message_delta":
		return c.messageDelta(out, ev)
	case "message_stop":
		return c.finish(out)
	case "content_block_stop":
		return c.blockStop(out, ev)
	case "error":
		c.st.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, errorBody(500, data))
	}
	return out // ping, content_block_stop, unknown events
}

func (c *chat) blockStart(out []byte, ev eventIn) []byte {
	switch ev.ContentBlock.Type {
	case "thinking":
		c.st.thinking.Text(ev.Index, []byte(ev.ContentBlock.Thinking))
		c.st.thinking.Sign(ev.Index, ev.ContentBlock.Signature)
		return out
	case "redacted_thinking":
		return c.emit(out, api.Delta{ThinkingBlocks: []api.ThinkingBlock{{Type: "redacted_thinking", Data: ev.ContentBlock.Data}}}, nil)
	case "tool_use":
	default:
		return out
	}
	if c.jsonMode && ev.ContentBlock.Name == jsonTool {
		c.st.jsonBlock = ev.Index + 1
		return out
	}
	if c.st.tools == nil {
		c.st.tools = map[int]int{}
	}
	idx := len(c.st.tools)
	c.st.tools[ev.Index] = idx
	tc := api.ToolCall{Index: &idx, ID: ev.ContentBlock.ID, Type: "function"}
	tc.Function.Name = ev.ContentBlock.Name
	return c.emit(out, api.Delta{ToolCalls: []api.ToolCall{tc}}, nil)
}

func (c *chat) blockDelta(out []byte, ev eventIn) []byte {
	switch ev.Delta.Type {
	case "text_delta":
		text := ev.Delta.Text
		return c.emit(out, api.Delta{Content: &text}, nil)
	case "thinking_delta":
		if ev.Delta.Thinking == "" { // an empty delta would be a chunk that says nothing
			return out
		}
		c.st.thinking.Text(ev.Index, []byte(ev.Delta.Thinking))
		return c.emit(out, api.Delta{ReasoningContent: ev.Delta.Thinking}, nil)
	case "signature_delta":
		c.st.thinking.Sign(ev.Index, ev.Delta.Signature)
		return out
	case "input_json_delta":
		if c.st.jsonBlock == ev.Index+1 && ev.Delta.PartialJSON != "" {
			text := ev.Delta.PartialJSON
			return c.emit(out, api.Delta{Content: &text}, nil)
		}
		idx, ok := c.st.tools[ev.Index]
		if !ok || ev.Delta.PartialJSON == "" {
			return out
		}
		tc := api.ToolCall{Index: &idx}
		tc.Function.Arguments = ev.Delta.PartialJSON
		return c.emit(out, api.Delta{ToolCalls: []api.ToolCall{tc}}, nil)
	}
	return out // others carry nothing for OpenAI clients
}

// blockStop sends a thinking block whole, with its signature, when it
// ends: the client sends it back so (api.ThinkingBlock).
func (c *chat) blockStop(out []byte, ev eventIn) []byte {
	t, ok := c.st.thinking.End(ev.Index)
	if !ok {
		return out
	}
	return c.emit(out, api.Delta{ThinkingBlocks: []api.ThinkingBlock{t}}, nil)
}

// messageDelta carries the stop reason and the final output tokens.
func (c *chat) messageDelta(out []byte, ev eventIn) []byte {
	if ev.Usage != nil {
		c.usage = ev.Usage.after(c.usage)
	}
	if ev.Delta.StopReason == "" {
		return out
	}
	reason := c.finishReason(ev.Delta.StopReason, len(c.st.tools) > 0)
	return c.emit(out, api.Delta{}, &reason)
}

// finish ends a complete stream: the usage chunk if asked for, then [DONE].
func (c *chat) finish(out []byte) []byte {
	c.st.done = true
	if c.req.IncludeUsage {
		out = c.chunks().Usage(out, c.usage)
	}
	return append(out, api.DoneEvent...)
}

// chunks writes the stream's chunks, which name the model the client
// asked for, not Anthropic's id for it: clients compare the two.
func (c *chat) chunks() api.ChunkWriter {
	return api.ChunkWriter{ID: c.st.id, Model: c.req.Model, Created: c.created}
}

func (c *chat) emit(out []byte, d api.Delta, finish *string) []byte {
	return c.chunks().Delta(out, d, finish)
}
