package openai

import "bytes"

// member is one member of a JSON object or one element of an array (key
// nil): the key (without quotes, unescaped only if it had no escapes), the
// value, and where the entry's text starts and ends in the document,
// including its leading comma or whitespace.
type member struct {
	key        []byte
	value      []byte
	start, end int
	vs         int // where value starts
}

// topMembers lists the top-level members of a JSON object without decoding
// values. obj must be valid JSON (json.Valid); it returns false if obj is
// not an object.
func topMembers(obj []byte, out []member) ([]member, bool) {
	it, ok := entries(obj, skipSpace(obj, 0))
	if !ok || !it.object {
		return out, false
	}
	for {
		m, more := it.next()
		if !more {
			return out, it.ok
		}
		out = append(out, m)
	}
}

// entryIter walks the members of an object or the elements of an array
// in valid JSON without decoding or allocating. Offsets are into doc.
type entryIter struct {
	doc    []byte
	i      int
	object bool
	ok     bool // false once the text was found malformed
}

// entries starts a walk of the object or array at doc[at]; it returns
// false if there is none.
func entries(doc []byte, at int) (entryIter, bool) {
	if at >= len(doc) || doc[at] != '{' && doc[at] != '[' {
		return entryIter{}, false
	}
	return entryIter{doc: doc, i: at + 1, object: doc[at] == '{', ok: true}, true
}

// next returns the next entry, or false at the closing bracket (or at
// malformed text, which sets ok false).
func (it *entryIter) next() (member, bool) {
	b := it.doc
	start := it.i
	i := skipSpace(b, it.i)
	if i < len(b) && (b[i] == '}' || b[i] == ']') {
		return member{}, false
	}
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	var key []byte
	if it.object {
		if i >= len(b) || b[i] != '"' {
			it.ok = false
			return member{}, false
		}
		keyEnd := skipString(b, i)
		if keyEnd < i+2 || b[keyEnd-1] != '"' {
			it.ok = false
			return member{}, false
		}
		key = b[i+1 : keyEnd-1]
		i = skipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			it.ok = false
			return member{}, false
		}
		i = skipSpace(b, i+1)
	}
	ve := skipValue(b, i)
	if ve <= i {
		it.ok = false
		return member{}, false
	}
	it.i = ve
	return member{key: key, value: b[i:ve], start: start, end: ve, vs: i}, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
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

func isNullValue(v []byte) bool { return bytes.Equal(v, []byte("null")) }

// JSON value kinds, by a value's first byte.
const (
	kindObject = '{'
	kindArray  = '['
	kindString = '"'
	kindNull   = 'n'
	kindBool   = 't'
	kindNumber = '0'
)

// kind is the kind of a valid JSON value.
func kind(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '{', '[', '"', 'n', 't':
		return c
	case 'f':
		return kindBool
	}
	return kindNumber
}

// isInt reports whether v is a JSON number without fraction or exponent.
func isInt(v []byte) bool {
	return kind(v) == kindNumber && !bytes.ContainsAny(v, ".eE")
}
