package api

import (
	"bytes"
	"encoding/json"
)

// Strip names what a provider that takes OpenAI-shaped messages must not
// get: the gateway's thinking_blocks, DeepSeek's reasoning_content (both
// put in assistant messages by an earlier answer, and sent back by
// clients), and cache_control markers (on messages, their content parts
// and tools), which only Anthropic-shaped APIs take.
type Strip struct {
	ThinkingBlocks, ReasoningContent, CacheControl bool
}

// In reports whether raw (messages or tools) may hold what s strips: a
// cheap test before the decoding StripMessages and StripTools do.
func (s Strip) In(raw []byte) bool {
	return s.ThinkingBlocks && bytes.Contains(raw, []byte(`"thinking_blocks"`)) ||
		s.ReasoningContent && bytes.Contains(raw, []byte(`"reasoning_content"`)) ||
		s.CacheControl && bytes.Contains(raw, []byte(`"cache_control"`))
}

// Messages removes what s strips from msgs, in place: members of the
// messages, and cache_control from their content parts.
func (s Strip) Messages(msgs []map[string]json.RawMessage) {
	for _, m := range msgs {
		if s.ThinkingBlocks {
			delete(m, "thinking_blocks")
		}
		if s.ReasoningContent {
			delete(m, "reasoning_content")
		}
		if !s.CacheControl {
			continue
		}
		delete(m, "cache_control")
		if c := m["content"]; bytes.Contains(c, []byte(`"cache_control"`)) {
			m["content"] = withoutMember(c, "cache_control")
		}
	}
}

// Tools is tools (a JSON array of tool objects) without their
// cache_control, when s strips it; tools as they are otherwise.
func (s Strip) Tools(tools json.RawMessage) json.RawMessage {
	if !s.CacheControl || !bytes.Contains(tools, []byte(`"cache_control"`)) {
		return tools
	}
	return withoutMember(tools, "cache_control")
}

// withoutMember is raw, an array of objects, without the named member of
// each object; raw as it is when it is no such array.
func withoutMember(raw json.RawMessage, name string) json.RawMessage {
	var objects []map[string]json.RawMessage
	if json.Unmarshal(raw, &objects) != nil {
		return raw
	}
	for _, o := range objects {
		delete(o, name)
	}
	b, err := json.Marshal(objects)
	if err != nil {
		return raw
	}
	return b
}
