package responses

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"modelgate/translate/jsonscan"
)

// The stream fast paths read the few members of an event they need in
// place and write delta events directly, where decoding into structs or
// maps and json.Marshal would cost dozens of allocations per event. They
// must read and write exactly what encoding/json would, so they only take
// what they can be sure of and leave anything unusual to encoding/json.

// plainMembers finds the members of the JSON object obj (valid JSON) named
// in names and puts each one's value at the name's index in vals (nil when
// absent, the value as it is, null included, when present). It reports
// false when obj is no object, or when encoding/json might match its keys
// otherwise than by exact name: a name given twice (the last one would
// win), or a key with an escape, a non-ASCII byte or a match of a name in
// another case (encoding/json matches keys case-insensitively).
func plainMembers(obj []byte, names []string, vals [][]byte) bool {
	clear(vals)
	it, ok := jsonscan.Entries(obj, jsonscan.SkipSpace(obj, 0))
	if !ok || !it.Object {
		return false
	}
	for {
		m, more := it.Next()
		if !more {
			return it.OK
		}
		i := nameIndex(m.Key, names)
		switch {
		case i >= 0 && vals[i] == nil:
			vals[i] = m.Value
		case i >= 0 || !otherKey(m.Key, names):
			return false
		}
	}
}

func nameIndex(key []byte, names []string) int {
	for i, name := range names {
		if string(key) == name {
			return i
		}
	}
	return -1
}

// otherKey reports whether encoding/json surely matches key to none of
// names.
func otherKey(key []byte, names []string) bool {
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	for _, name := range names {
		if bytes.EqualFold(key, []byte(name)) {
			return false
		}
	}
	return true
}

// nullOr reports whether the member value v (valid JSON) is absent, null
// or of kind (a jsonscan kind).
func nullOr(v []byte, kind byte) bool {
	k := jsonscan.Kind(v)
	return k == 0 || k == jsonscan.Null || k == kind
}

// intOrNull reports whether encoding/json decodes the member value v into
// an int of bits bits without error: absent, null, or an integer in range.
func intOrNull(v []byte, bits int) bool {
	if jsonscan.IsNull(v) {
		return true
	}
	if !jsonscan.IsInt(v) {
		return false
	}
	_, err := strconv.ParseInt(string(v), 10, bits)
	return err == nil
}

// jsonText is the text of the JSON string lit (valid JSON; absent or null
// is ""), decoded as encoding/json decodes it: escapes resolved, an
// invalid surrogate or byte of invalid UTF-8 replaced by U+FFFD. It is a
// part of lit when that holds nothing to decode, else decoded into
// *scratch, so it is valid until the next call with the same scratch.
func jsonText(lit []byte, scratch *[]byte) []byte {
	if len(lit) < 2 || lit[0] != '"' {
		return nil
	}
	s := lit[1 : len(lit)-1]
	r := 0
	for r < len(s) {
		c := s[r]
		if c == '\\' || c == '"' || c < ' ' {
			break
		}
		if c < utf8.RuneSelf {
			r++
			continue
		}
		rr, size := utf8.DecodeRune(s[r:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		r += size
	}
	if r == len(s) {
		return s
	}
	b := append((*scratch)[:0], s[:r]...)
	for r < len(s) {
		c := s[r]
		switch {
		case c == '\\' && r+1 < len(s):
			r++
			switch s[r] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := hex4(s[r+1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					// A pair makes one rune; a lone half is U+FFFD,
					// and what follows it is read on its own.
					if r+1 < len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							b = utf8.AppendRune(b, dec)
							r += 6
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // " \ /
				b = append(b, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr) // U+FFFD for a byte of invalid UTF-8
			r += size
		}
	}
	*scratch = b
	return b
}

// hex4 is the rune of the four hex digits b starts with, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as json.Marshal writes a string: with <, >
// and &, U+2028 and U+2029 escaped, and each byte of invalid UTF-8 as
// \ufffd.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// maxPlainDepth bounds the nesting plainValid follows; deeper JSON, which
// no stream event has, is left to encoding/json.
const maxPlainDepth = 32

// plainValid reports whether data is one valid JSON value, as json.Valid
// does, in a fraction of its time: the fast paths check every event. It
// reports false for JSON nested deeper than maxPlainDepth.
func plainValid(data []byte) bool {
	i, ok := validValue(data, jsonscan.SkipSpace(data, 0), 0)
	return ok && jsonscan.SkipSpace(data, i) == len(data)
}

// validValue checks the value at b[i] and returns the index after it.
func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return validString(b, i)
	case '{', '[':
		return validEntries(b, i, depth)
	case 't':
		return validLiteral(b, i, "true")
	case 'f':
		return validLiteral(b, i, "false")
	case 'n':
		return validLiteral(b, i, "null")
	}
	return validNumber(b, i)
}

// validEntries checks the object or array at b[i].
func validEntries(b []byte, i, depth int) (int, bool) {
	if depth >= maxPlainDepth {
		return i, false
	}
	object, end := b[i] == '{', byte(']')
	if object {
		end = '}'
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == end {
		return i + 1, true
	}
	for {
		var ok bool
		if object {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			if i, ok = validString(b, i); !ok {
				return i, false
			}
			if i = jsonscan.SkipSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, false
			}
			i = jsonscan.SkipSpace(b, i+1)
		}
		if i, ok = validValue(b, i, depth+1); !ok {
			return i, false
		}
		if i = jsonscan.SkipSpace(b, i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case end:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// validString checks the string at b[i]: no control character, only the
// escapes JSON has.
func validString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c < ' ':
			return j, false
		case c == '\\':
			if j++; j >= len(b) {
				return j, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if hex4(b[j+1:]) < 0 {
					return j, false
				}
				j += 4
			default:
				return j, false
			}
		}
	}
	return len(b), false
}

func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// validNumber checks the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
