package openai

import (
	"bytes"
	"encoding/json"

	"modelgate/translate/sse"
)

var doneEvent = []byte("data: [DONE]\n\n")

// streamChunk emits the whole events a chunk completes. At the end it adds
// [DONE], or an error event when the upstream broke off: the OpenAI SDKs
// otherwise end such a stream silently, as if it were complete.
func (c *chat) streamChunk(chunk []byte, endOfStream bool) []byte {
	var out []byte
	for _, ev := range c.dec.Feed(chunk) {
		out = c.event(out, ev.Data)
	}
	if !endOfStream {
		return out
	}
	if !c.done {
		out = sse.AppendData(out, MarshalError(ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	if c.sawDone {
		out = append(out, doneEvent...)
	}
	return out
}

// event translates one upstream event.
func (c *chat) event(out, data []byte) []byte {
	if c.done {
		return out // nothing after [DONE] or an error
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		c.done, c.sawDone = true, true
		return out
	}
	// Validity first: topMembers only handles well-formed JSON.
	var members []member
	ok := json.Valid(data)
	if ok {
		members, ok = topMembers(data, c.scratch[:0])
		c.scratch = members[:0]
	}
	if !ok {
		c.done = true
		return sse.AppendData(out, MarshalError(ErrorObject{Type: "server_error",
			Message: "The provider sent a stream event that is not a JSON object."}))
	}
	if errMember, found := find(members, "error"); found {
		c.done = true
		return sse.AppendData(out, NormalizeError(500, []byte(`{"error":`+string(errMember.value)+`}`)))
	}
	return c.chunk(out, data, members)
}

func find(members []member, key string) (member, bool) {
	for _, m := range members {
		if string(m.key) == key {
			return m, true
		}
	}
	return member{}, false
}

// chunk edits a CreateChatCompletionStreamResponse: reads usage, hides it
// when the client did not ask for it, and drops nulls the schema forbids.
func (c *chat) chunk(out, data []byte, members []member) []byte {
	if c.quirks.ContentParts && bytes.Contains(data, []byte(`"content":[`)) || c.quirks.RepairNulls && bytes.Contains(data, []byte("null")) {
		if fixed, ok := repairDeltas(data); ok {
			data = fixed
			members, _ = topMembers(data, c.scratch[:0])
		}
	}
	usage, hasUsage := find(members, "usage")
	realUsage := hasUsage && !isNullValue(usage.value)
	choices, _ := find(members, "choices")
	if realUsage {
		c.usage = parseUsage(usage.value)
		if !c.req.IncludeUsage && isEmptyArray(choices.value) {
			return out // the usage-only chunk the gateway asked for
		}
	}
	// A server that reports usage on its last content chunk (Mistral) has
	// it split off into OpenAI's separate usage chunk when asked for.
	split := realUsage && c.req.IncludeUsage && !isEmptyArray(choices.value)
	keepUsage := c.req.IncludeUsage && !split
	edit := func(m member) bool {
		if string(m.key) == "usage" {
			return !keepUsage
		}
		return isNullValue(m.value)
	}
	out = append(out, "data: "...)
	out = dropMembers(out, data, members, edit)
	out = append(out, "\n\n"...)
	if split {
		out = c.usageChunk(out, members, usage.value)
	}
	return out
}

// usageChunk appends {id, object, created, model, choices: [], usage}.
func (c *chat) usageChunk(out []byte, members []member, usage []byte) []byte {
	u := map[string]json.RawMessage{"choices": json.RawMessage("[]"), "usage": usage}
	for _, key := range []string{"id", "object", "created", "model"} {
		if m, ok := find(members, key); ok {
			u[key] = m.value
		}
	}
	b, err := json.Marshal(u)
	if err != nil {
		return out
	}
	return sse.AppendData(out, b)
}

// repairDeltas makes choices' deltas valid: content given as typed parts
// (Mistral streams thinking this way) becomes OpenAI's string content with
// thinking text as reasoning_content, and null members the schema forbids
// are dropped (content and refusal may be null).
func repairDeltas(data []byte) ([]byte, bool) {
	var chunk map[string]any
	if json.Unmarshal(data, &chunk) != nil {
		return nil, false
	}
	choices, _ := chunk["choices"].([]any)
	for _, ch := range choices {
		delta, _ := ch.(map[string]any)["delta"].(map[string]any)
		for k, v := range delta {
			if v == nil && k != "content" && k != "refusal" {
				delete(delta, k)
			}
		}
		parts, isParts := delta["content"].([]any)
		if !isParts {
			continue
		}
		text, thinking := partsText(parts)
		delta["content"] = text
		if thinking != "" {
			delta["reasoning_content"] = thinking
		}
	}
	b, err := json.Marshal(chunk)
	return b, err == nil
}

func partsText(parts []any) (text, thinking string) {
	for _, p := range parts {
		part, _ := p.(map[string]any)
		switch part["type"] {
		case "text":
			s, _ := part["text"].(string)
			text += s
		case "thinking":
			inner, _ := part["thinking"].([]any)
			t, _ := partsText(inner)
			thinking += t
		}
	}
	return text, thinking
}

func isEmptyArray(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) >= 2 && v[0] == '[' && len(bytes.TrimSpace(v[1:len(v)-1])) == 0
}
