package responses

import (
	"slices"
	"strconv"
)

// A stream's message item has up to two content parts, in the order they
// began: the answer's text (output_text) and a refusal, which a chat
// stream sends apart from the content (delta.refusal) and the Responses
// API as a part of its own, with response.refusal.delta and .done events
// where text has response.output_text's.

// The content part types of a message.
const (
	textKind    = "output_text"
	refusalKind = "refusal"
)

// messagePart is the content index of the message's part of kind. A new
// part is added (and the message item, before its first part).
func (s *Stream) messagePart(kind string) int {
	if s.message == nil {
		s.message = s.newItem("message", outputID("msg_", s.id, -1))
		s.emit("response.output_item.added", map[string]any{"output_index": s.message.index,
			"item": map[string]any{"type": "message", "id": s.message.id, "status": "in_progress", "role": "assistant", "content": []any{}}})
	}
	it := s.message
	if i := slices.Index(it.parts, kind); i >= 0 {
		return i
	}
	it.parts = append(it.parts, kind)
	i := len(it.parts) - 1
	s.emit("response.content_part.added", map[string]any{"output_index": it.index, "item_id": it.id,
		"content_index": i, "part": it.part(kind)})
	return i
}

func (s *Stream) textDelta(delta []byte) {
	i := s.messagePart(textKind)
	s.message.text.Write(delta)
	s.emitDelta(textDeltaAt(i), s.message, delta)
}

// textDeltaAt is the text delta event of the part at index: 0 but after
// a refusal.
func textDeltaAt(index int) deltaEvent {
	if index == 0 {
		return textDeltaEvent
	}
	e := textDeltaEvent
	e.head = `"content_index":` + strconv.Itoa(index) + ","
	return e
}

// refusalDelta adds a piece of the model's refusal. Refusals are rare
// and short: their events go through emit.
func (s *Stream) refusalDelta(delta string) {
	i := s.messagePart(refusalKind)
	s.message.refusal.WriteString(delta)
	s.emit("response.refusal.delta", map[string]any{"output_index": s.message.index, "item_id": s.message.id,
		"content_index": i, "delta": delta})
}

// part renders the message's part of kind as it stands.
func (it *outItem) part(kind string) map[string]any {
	if kind == refusalKind {
		return refusalPart(it.refusal.String())
	}
	return textPart(it.text.String())
}

func refusalPart(text string) map[string]any {
	return map[string]any{"type": "refusal", "refusal": text}
}

// messageItem renders a message item with its parts.
func (it *outItem) messageItem(status string) map[string]any {
	content := make([]any, 0, len(it.parts))
	for _, kind := range it.parts {
		content = append(content, it.part(kind))
	}
	return map[string]any{"type": "message", "id": it.id, "status": status, "role": "assistant", "content": content}
}

// closeParts ends each part of a message: its text's or refusal's done
// event, then content_part.done.
func (s *Stream) closeParts(it *outItem) {
	for i, kind := range it.parts {
		at := map[string]any{"output_index": it.index, "item_id": it.id, "content_index": i}
		if kind == refusalKind {
			at["refusal"] = it.refusal.String()
			s.emit("response.refusal.done", at)
		} else {
			at["text"], at["logprobs"] = it.text.String(), []any{}
			s.emit("response.output_text.done", at)
		}
		s.emit("response.content_part.done", map[string]any{"output_index": it.index, "item_id": it.id,
			"content_index": i, "part": it.part(kind)})
	}
}
