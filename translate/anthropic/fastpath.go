package anthropic

import (
	"bytes"
	"encoding/json"

	"modelgate/translate/jsonscan"
)

// The fast path of the stream: content_block_delta events, one per
// streamed token, are read with jsonscan and their text re-encoded
// straight into the chunk (api.DeltaChunks), with no decoding into
// eventIn and no marshaling. It takes only events whose reading it is
// sure of: well-formed JSON with the members it expects, of the types
// eventIn gives them, and keys that json.Unmarshal could not match to
// another field (it matches case-insensitively). Anything else (nulls,
// duplicate members, escaped keys or type names, other events) goes to
// decodedEvent, so the output is the same either way.

// deltaEvent is what the fast path reads of a content_block_delta event:
// the delta's texts as JSON string literals, nil when absent.
type deltaEvent struct {
	index                       int
	typ                         []byte // the delta's type, unescaped
	text, thinking, partialJSON []byte
}

// The members json.Unmarshal would read into eventIn and its delta.
var (
	eventFields = []string{"type", "index", "message", "content_block", "delta", "usage", "error"}
	deltaFields = []string{"type", "text", "thinking", "partial_json", "stop_reason"}
)

// fastDelta translates a content_block_delta event of the usual shape. It
// returns false, having appended nothing, for any event it does not take.
func (c *chat) fastDelta(out, data []byte) ([]byte, bool) {
	ev, ok := readDeltaEvent(data)
	if !ok {
		return out, false
	}
	d := &c.st.deltas
	d.Use(c.chunks())
	switch string(ev.typ) {
	case "text_delta":
		if ev.text == nil {
			return d.Content(out, []byte(`""`))
		}
		return d.Content(out, ev.text)
	case "thinking_delta":
		if emptyString(ev.thinking) { // an empty delta would be a chunk that says nothing
			return out, true
		}
		return d.Reasoning(out, ev.thinking)
	case "input_json_delta":
		if emptyString(ev.partialJSON) {
			return out, true
		}
		if c.st.jsonBlock == ev.index+1 {
			return d.Content(out, ev.partialJSON)
		}
		if idx, ok := c.st.tools[ev.index]; ok {
			return d.ToolArguments(out, idx, ev.partialJSON)
		}
	}
	return out, true // signature_delta and others carry nothing for OpenAI clients
}

// emptyString reports whether a string literal, nil when absent, decodes
// to "": only "" does, as every escape stands for a character.
func emptyString(lit []byte) bool { return lit == nil || string(lit) == `""` }

// readDeltaEvent reads a content_block_delta event, or returns false.
func readDeltaEvent(data []byte) (deltaEvent, bool) {
	var ev deltaEvent
	var typ, delta []byte
	hasIndex := false
	ok := members(data, func(key, v []byte) bool {
		switch string(key) {
		case "type":
			if typ != nil {
				return false
			}
			typ = v
		case "index":
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
		default:
			return unknownMember(key, v, eventFields)
		}
		return true
	})
	if !ok || string(typ) != `"content_block_delta"` || delta == nil {
		return ev, false
	}
	ok = members(delta, func(key, v []byte) bool {
		var field *[]byte
		switch string(key) {
		case "type":
			field = &ev.typ
		case "text":
			field = &ev.text
		case "thinking":
			field = &ev.thinking
		case "partial_json":
			field = &ev.partialJSON
		case "stop_reason":
			return validString(v) // read, and not used here; a duplicate is harmless
		default:
			return unknownMember(key, v, deltaFields)
		}
		if *field != nil || !validString(v) {
			return false
		}
		*field = v
		return true
	})
	// The type is compared as it is written: an escaped one is left to
	// the full decoding.
	if !ok || ev.typ == nil || bytes.IndexByte(ev.typ, '\\') >= 0 {
		return ev, false
	}
	ev.typ = ev.typ[1 : len(ev.typ)-1]
	return ev, true
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
