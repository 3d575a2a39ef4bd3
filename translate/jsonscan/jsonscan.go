// Package jsonscan reads and writes JSON text without encoding/json's
// decoding into values, for the translators' hot paths, and does it
// exactly as encoding/json would:
//
//   - Iter and Members walk JSON already known to be valid: the members
//     of an object, the elements of an array, the Kind of a value, with
//     offsets into the document, so callers can edit it in place, as
//     SetString does a member's string.
//   - Cursor reads a document in one strict pass, checking it as it goes;
//     Valid checks a whole one, and KeyMayMean tells whether encoding/json
//     could take a key for one of some fields (it reads keys without
//     regard to case).
//   - AppendQuoted writes a string as json.Marshal does; AppendTokenBody,
//     Unquote and IsText read a string token as json.Unmarshal does.
//
// What that saves is measured where it is used: the stream fast paths of
// translate/anthropic and translate/bedrock (their fastpath.go: a text
// delta in a fifth of the time or less, one allocation instead of 14–16).
package jsonscan

import "bytes"

// Member is one Member of a JSON object or one element of an array (key
// nil): the key (without quotes, unescaped only if it had no escapes), the
// value, and where the entry's text starts and ends in the document,
// including its leading comma or whitespace.
type Member struct {
	Key        []byte
	Value      []byte
	Start, End int
	VS         int // where Value starts
}

// Members lists the top-level members of a JSON object without decoding
// values. obj must be valid JSON (json.Valid); it returns false if obj is
// not an object.
func Members(obj []byte, out []Member) ([]Member, bool) {
	it, ok := Entries(obj, SkipSpace(obj, 0))
	if !ok || !it.Object {
		return out, false
	}
	for {
		m, more := it.Next()
		if !more {
			return out, it.OK
		}
		out = append(out, m)
	}
}

// SetString is doc with the string s as the value of every member named
// key (escaped or not) of the object at doc[at], in valid JSON, and
// whether that changed doc. Every other byte stays as it was; doc itself
// is returned, not copied, when the object has no such member or each
// already reads as s.
func SetString(doc []byte, at int, key, s string) ([]byte, bool) {
	it, ok := Entries(doc, at)
	if !ok || !it.Object {
		return doc, false
	}
	var out []byte
	prev := 0
	for {
		m, more := it.Next()
		if !more {
			break
		}
		if !bodyIs(m.Key, key) || IsText(m.Value, s) {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(doc)+len(s)+8)
		}
		out = AppendQuoted(append(out, doc[prev:m.VS]...), s)
		prev = m.End
	}
	if out == nil {
		return doc, false
	}
	return append(out, doc[prev:]...), true
}

// ValidMembers is Members and Valid in one pass: it lists the top-level
// members of obj and reports whether obj is one valid JSON object. Like
// Valid it refuses nesting deeper than 64 levels; callers that must take
// those ask encoding/json.
func ValidMembers(obj []byte, out []Member) ([]Member, bool) {
	c := NewCursor(obj)
	start := SkipSpace(obj, 0) + 1
	for key, more := c.FirstKey(); more; key, more = c.NextKey() {
		c.peek()
		vs := c.pos
		v := c.Skip()
		out = append(out, Member{Key: key, Value: v, Start: start, VS: vs, End: vs + len(v)})
		start = vs + len(v)
	}
	return out, c.End()
}

// Iter walks the members of an object or the elements of an array
// in valid JSON without decoding or allocating. Offsets are into doc.
type Iter struct {
	doc    []byte
	i      int
	Object bool
	OK     bool // false once the text was found malformed
}

// Entries starts a walk of the object or array at doc[at]; it returns
// false if there is none.
func Entries(doc []byte, at int) (Iter, bool) {
	if at >= len(doc) || doc[at] != '{' && doc[at] != '[' {
		return Iter{}, false
	}
	return Iter{doc: doc, i: at + 1, Object: doc[at] == '{', OK: true}, true
}

// Next returns the Next entry, or false at the closing bracket (or at
// malformed text, which sets ok false).
func (it *Iter) Next() (Member, bool) {
	b := it.doc
	start := it.i
	i := SkipSpace(b, it.i)
	if i < len(b) && (b[i] == '}' || b[i] == ']') {
		return Member{}, false
	}
	if i < len(b) && b[i] == ',' {
		i = SkipSpace(b, i+1)
	}
	var key []byte
	if it.Object {
		if i >= len(b) || b[i] != '"' {
			it.OK = false
			return Member{}, false
		}
		keyEnd := skipString(b, i)
		if keyEnd < i+2 || b[keyEnd-1] != '"' {
			it.OK = false
			return Member{}, false
		}
		key = b[i+1 : keyEnd-1]
		i = SkipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			it.OK = false
			return Member{}, false
		}
		i = SkipSpace(b, i+1)
	}
	ve := skipValue(b, i)
	if ve <= i {
		it.OK = false
		return Member{}, false
	}
	it.i = ve
	return Member{Key: key, Value: b[i:ve], Start: start, End: ve, VS: i}, true
}

// SkipSpace returns the index of the first byte from b[i] on that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	// Quote to quote, at memchr's speed over a long string (an inline
	// image); a quote after an odd run of backslashes is escaped.
	for j := i + 1; j < len(b); {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			break
		}
		q += j
		n := 0
		for k := q - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && !isDelim(b[j]) {
		j++
	}
	return j
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\n', '\r', '\t':
		return true
	}
	return false
}

// IsNull reports whether v is JSON null or absent (empty).
func IsNull(v []byte) bool { return len(v) == 0 || bytes.Equal(v, []byte("null")) }

// TrimSpace cuts JSON whitespace from both ends of b.
func TrimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// JSON value kinds, by a value's first byte.
const (
	Object = '{'
	Array  = '['
	String = '"'
	Null   = 'n'
	Bool   = 't'
	Number = '0'
)

// Kind is the Kind of a valid JSON value.
func Kind(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '{', '[', '"', 'n', 't':
		return c
	case 'f':
		return Bool
	}
	return Number
}

// IsInt reports whether v is a JSON number without fraction or exponent.
func IsInt(v []byte) bool {
	return Kind(v) == Number && !bytes.ContainsAny(v, ".eE")
}
