package bedrock

import (
	"bytes"
	"encoding/json"

	"modelgate/translate/jsonscan"
)

// The fast path of the stream: contentBlockDelta events, one per streamed
// token, are read with jsonscan and their text re-encoded straight into
// the chunk (api.DeltaChunks), with no decoding into streamEvent and no
// marshaling. It takes only payloads whose reading it is sure of:
// well-formed JSON with the members it expects, of the types streamEvent
// gives them, and keys that json.Unmarshal could not match to another
// field (it matches case-insensitively); Bedrock's padding member "p" is
// such a key. Anything else (nulls, duplicate members, escaped keys)
// goes to decodedFrame's full decoding, so the output is the same either
// way. members and the checks under it are the same as translate/anthropic's
// fast path's.

// deltaEvent is what the fast path reads of a contentBlockDelta payload:
// the delta's texts as JSON string literals, nil when absent, and whether
// it has a toolUse or reasoningContent object.
type deltaEvent struct {
	index                int
	text                 []byte
	toolUse, reasoning   bool
	input, reasoningText []byte
}

// The members json.Unmarshal would read into streamEvent and the objects
// in its delta.
var (
	eventFields     = []string{"contentBlockIndex", "start", "delta", "stopReason", "usage", "message"}
	deltaFields     = []string{"text", "toolUse", "reasoningContent"}
	toolUseFields   = []string{"input"}
	reasoningFields = []string{"text"}
)

// fastDelta translates a contentBlockDelta payload of the usual shape. It
// returns false, having appended nothing, for any payload it does not
// take.
func (c *chat) fastDelta(out, payload []byte) ([]byte, bool) {
	ev, ok := readDeltaEvent(payload)
	if !ok {
		return out, false
	}
	d := &c.deltas
	d.Use(c.chunks())
	switch {
	case ev.text != nil:
		return d.Content(out, ev.text)
	case ev.reasoning:
		if ev.reasoningText == nil || string(ev.reasoningText) == `""` { // a signature or redacted reasoning: nothing for OpenAI clients
			return out, true
		}
		return d.Reasoning(out, ev.reasoningText)
	case ev.toolUse:
		input := ev.input
		if input == nil {
			input = []byte(`""`)
		}
		if c.jsonBlock == ev.index+1 {
			return d.Content(out, input)
		}
		if idx, ok := c.tools[ev.index]; ok {
			return d.ToolArguments(out, idx, input)
		}
	}
	return out, true
}

// readDeltaEvent reads a contentBlockDelta payload, or returns false.
func readDeltaEvent(payload []byte) (deltaEvent, bool) {
	var ev deltaEvent
	var delta []byte
	hasIndex := false
	ok := members(payload, func(key, v []byte) bool {
		switch string(key) {
		case "contentBlockIndex":
			if hasIndex {
				return false
			}
			ev.index, hasIndex = smallInt(v), true
			return ev.index >= 0
		case "delta":
			if delta != nil {
				return false
			}
			delta = v
			return true
		}
		return unknownMember(key, v, eventFields)
	})
	if !ok || delta == nil {
		return ev, false
	}
	ok = members(delta, func(key, v []byte) bool {
		switch string(key) {
		case "text":
			if ev.text != nil || !validString(v) {
				return false
			}
			ev.text = v
			return true
		case "toolUse":
			if ev.toolUse {
				return false
			}
			ev.toolUse = true
			return onlyString(v, "input", &ev.input, toolUseFields)
		case "reasoningContent":
			if ev.reasoning {
				return false
			}
			ev.reasoning = true
			return onlyString(v, "text", &ev.reasoningText, reasoningFields)
		}
		return unknownMember(key, v, deltaFields)
	})
	return ev, ok
}

// onlyString reads the object obj whose one member the translator uses is
// the string called name: it sets *lit to its literal.
func onlyString(obj []byte, name string, lit *[]byte, fields []string) bool {
	return members(obj, func(key, v []byte) bool {
		if string(key) != name {
			return unknownMember(key, v, fields)
		}
		if *lit != nil || !validString(v) {
			return false
		}
		*lit = v
		return true
	})
}

// members calls f with each member of the JSON object doc, and reports
// whether doc is one object, well-formed as far as members checks it
// (f checks the values), with plain keys (ASCII without escapes, so
// that they read as they are), and f accepted every member.
func members(doc []byte, f func(key, value []byte) bool) bool {
	it, ok := jsonscan.Entries(doc, jsonscan.SkipSpace(doc, 0))
	if !ok || !it.Object {
		return false
	}
	end := jsonscan.SkipSpace(doc, 0) + 1 // after the last member
	for first := true; ; first = false {
		m, more := it.Next()
		if !more {
			break
		}
		// jsonscan trusts the text to be valid: check what it skips.
		if sep := doc[jsonscan.SkipSpace(doc, m.Start)]; (sep == ',') == first {
			return false
		}
		if !plainKey(m.Key) || !f(m.Key, m.Value) {
			return false
		}
		end = m.End
	}
	end = jsonscan.SkipSpace(doc, end)
	return it.OK && end < len(doc) && doc[end] == '}' && jsonscan.SkipSpace(doc, end+1) == len(doc)
}

// plainKey reports whether a key is ASCII without escapes.
func plainKey(key []byte) bool {
	for _, c := range key {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

// unknownMember accepts a member json.Unmarshal ignores: a valid value
// whose key matches none of fields, not even in another case.
func unknownMember(key, v []byte, fields []string) bool {
	for _, f := range fields {
		if len(key) == len(f) && bytes.EqualFold(key, []byte(f)) {
			return false
		}
	}
	if jsonscan.Kind(v) == jsonscan.String {
		return validString(v)
	}
	return json.Valid(v)
}

// validString reports whether v is a valid JSON string literal.
func validString(v []byte) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		switch c := v[i]; {
		case c < 0x20 || c == '"':
			return false
		case c == '\\':
			i++
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(v)-1 || !isHex(v[i+1]) || !isHex(v[i+2]) || !isHex(v[i+3]) || !isHex(v[i+4]) {
					return false
				}
				i += 4
			default:
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// smallInt is the value of a JSON integer of up to 18 digits, without
// sign or leading zero, or -1.
func smallInt(v []byte) int {
	if len(v) == 0 || len(v) > 18 || len(v) > 1 && v[0] == '0' {
		return -1
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
