package api

import (
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Append-style writers for the delta chunks of a stream, for translators
// that run once per streamed token: they write the very bytes
// ChunkWriter.Delta writes (encoding/json's encoding of the chunk), but
// copy the constant start of every chunk from a prefix built once per
// stream, and re-encode the provider's JSON string literal of the text
// straight into the chunk instead of decoding it to a string and
// marshaling a ChatCompletionChunk around it.

// DeltaChunks writes the delta chunks of one stream that carry one text:
// content, reasoning content or a piece of a tool call's arguments. Its
// zero value is ready once Use has told it the stream.
type DeltaChunks struct {
	w      ChunkWriter
	prefix []byte // `data: {"id":…,"choices":[{"index":0,"delta":{`
}

// deltaSuffix ends a chunk without a finish reason after its delta.
const deltaSuffix = `},"finish_reason":null}]}` + "\n\n"

// Use makes d write the chunks of w's stream. The prefix the chunks share
// is built again only when w differs from the last one, so a translator
// can call Use before every chunk.
func (d *DeltaChunks) Use(w ChunkWriter) {
	if d.prefix != nil && d.w == w {
		return
	}
	d.w = w
	p := append(d.prefix[:0], `data: {"id":`...)
	p = appendQuotedString(p, w.ID)
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, w.Created, 10)
	p = append(p, `,"model":`...)
	p = appendQuotedString(p, w.Model)
	d.prefix = append(p, `,"choices":[{"index":0,"delta":{`...)
}

// Content appends the chunk of Delta{Content: &s}, where s is the string
// the JSON string literal lit decodes to. It returns false, with dst as it
// was, if lit is not a valid JSON string literal.
func (d *DeltaChunks) Content(dst, lit []byte) ([]byte, bool) {
	n := len(dst)
	dst = d.begin(dst, len(`"content":`)+len(lit))
	dst = append(dst, `"content":`...)
	return d.end(dst, n, lit, "")
}

// Reasoning appends the chunk of Delta{ReasoningContent: s}; s must not be
// empty (omitempty would drop the member), which the caller checks.
func (d *DeltaChunks) Reasoning(dst, lit []byte) ([]byte, bool) {
	n := len(dst)
	dst = d.begin(dst, len(`"reasoning_content":`)+len(lit))
	dst = append(dst, `"reasoning_content":`...)
	return d.end(dst, n, lit, "")
}

// ToolArguments appends the chunk of a tool call piece that carries only
// its index and (part of) its arguments.
func (d *DeltaChunks) ToolArguments(dst []byte, index int, lit []byte) ([]byte, bool) {
	n := len(dst)
	dst = d.begin(dst, len(`"tool_calls":[{"index":,"function":{"arguments":}}]`)+20+len(lit))
	dst = append(dst, `"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"function":{"arguments":`...)
	return d.end(dst, n, lit, "}}]")
}

// begin makes room for a chunk whose delta takes about size bytes, and
// appends the prefix. Most texts need no escapes, so one allocation at
// most is the usual.
func (d *DeltaChunks) begin(dst []byte, size int) []byte {
	need := len(d.prefix) + size + len(deltaSuffix)
	if cap(dst)-len(dst) < need {
		grown := make([]byte, len(dst), max(len(dst)+need+size/4, 2*cap(dst)))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, d.prefix...)
}

// end appends the re-encoded literal, tail and the end of the chunk; on an
// invalid literal it cuts dst back to its first n bytes.
func (d *DeltaChunks) end(dst []byte, n int, lit []byte, tail string) ([]byte, bool) {
	dst, ok := AppendStringLiteral(dst, lit)
	if !ok {
		return dst[:n], false
	}
	dst = append(dst, tail...)
	return append(dst, deltaSuffix...), true
}

// AppendStringLiteral appends the JSON string literal lit (quotes
// included) as encoding/json marshals the string json.Unmarshal decodes
// it to: invalid UTF-8 and unpaired surrogate escapes become U+FFFD, and
// the result is escaped as Marshal escapes (<, >, &, U+2028 and U+2029
// too). It returns false, with dst as it was, if lit is not a valid JSON
// string literal.
func AppendStringLiteral(dst, lit []byte) ([]byte, bool) {
	n := len(dst)
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return dst, false
	}
	s := lit[1 : len(lit)-1]
	dst = append(dst, '"')
	start := 0 // s[start:i] is copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII(c) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch {
			case c == '\\':
				r, size := readEscape(s[i:])
				if size == 0 {
					return dst[:n], false
				}
				dst = appendQuotedRune(dst, r)
				i += size
			case c == '"' || c < 0x20: // not allowed unescaped in a literal
				return dst[:n], false
			default: // <, >, &
				dst = appendQuotedRune(dst, rune(c))
				i++
			}
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// Unmarshal makes an invalid byte U+FFFD, which Marshal
			// then writes as it is.
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, unicode.ReplacementChar)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = appendQuotedRune(dst, r)
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// safeASCII reports whether Marshal writes the ASCII byte c as it is.
func safeASCII(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// readEscape decodes the escape sequence at the start of s as Unmarshal
// does, and returns its length, or 0 if it is not a valid one. A
// surrogate escape takes the next escape as its pair when they make one
// character, and is U+FFFD otherwise.
func readEscape(s []byte) (rune, int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hexValue(s[2:])
		if r < 0 {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if pair := utf16.DecodeRune(r, hexValue(s[8:])); pair != unicode.ReplacementChar {
				return pair, 12
			}
		}
		return unicode.ReplacementChar, 6
	}
	return 0, 0
}

// hexValue is the value of the four hex digits at the start of s, or -1.
func hexValue(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// appendQuotedRune appends r as Marshal writes it inside a string.
func appendQuotedRune(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch {
	case r < utf8.RuneSelf && safeASCII(byte(r)):
		return append(dst, byte(r))
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r == '\b':
		return append(dst, '\\', 'b')
	case r == '\f':
		return append(dst, '\\', 'f')
	case r == '\n':
		return append(dst, '\\', 'n')
	case r == '\r':
		return append(dst, '\\', 'r')
	case r == '\t':
		return append(dst, '\\', 't')
	case r < utf8.RuneSelf: // other control bytes, <, >, &
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xF])
	case r == '\u2028' || r == '\u2029':
		return append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// appendQuotedString appends s as Marshal writes a string.
func appendQuotedString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = appendQuotedRune(dst, r)
		}
		i += size
	}
	return append(dst, '"')
}
