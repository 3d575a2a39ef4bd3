package api

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Helpers for translators that write stream chunks by appending rather
// than through encoding/json, which costs a few microseconds and a few
// dozen allocations per chunk. What they append is byte for byte what
// encoding/json would have written, and JSONCursor reads an upstream
// event in one strict pass without decoding it; whatever a translator's
// fast road does not expect, it leaves to its encoding/json road.

// ChunkHead is the start of every chunk event of the stream, up to the
// choices: `data: {"id":…,"object":"chat.completion.chunk","created":…,
// "model":…,"choices":[`. A stream computes it once; each chunk then
// appends its choices and ChunkTail, and is the event Chunk would write.
func (w ChunkWriter) ChunkHead() []byte {
	b := make([]byte, 0, 96+len(w.ID)+len(w.Model))
	b = append(b, `data: {"id":`...)
	b = AppendQuoted(b, w.ID)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, w.Created, 10)
	b = append(b, `,"model":`...)
	b = AppendQuoted(b, w.Model)
	return append(b, `,"choices":[`...)
}

// ChunkTail ends a chunk event that ChunkHead started.
const ChunkTail = "]}\n\n"

// AppendQuoted appends s as a JSON string, escaped as encoding/json
// escapes it: <, > and & as \u003c and so on, U+2028 and U+2029, and
// invalid UTF-8 as \ufffd.
func AppendQuoted[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if marshalsAsIs(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendMarshaledASCII(dst, b)
			i++
			start = i
			continue
		}
		// As encoding/json: a few bytes as a string, which stays on the
		// stack, whether s is a string or bytes.
		r, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = appendMarshaledSeparator(dst, r)
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendTokenBody appends the text of tok, a JSON string token of valid
// JSON (quotes included, as JSONCursor.StringToken returns it), escaped as
// encoding/json escapes it but without the quotes: the bytes between the
// quotes of json.Marshal of the string json.Unmarshal reads from tok. So
// the bodies of several tokens appended in a row are the body of their
// concatenation.
func AppendTokenBody(dst, tok []byte) []byte {
	if len(tok) < 2 {
		return dst
	}
	s := tok[1 : len(tok)-1]
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if marshalsAsIs(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			if b != '\\' {
				dst = appendMarshaledASCII(dst, b)
				i++
			} else {
				r, n := unescapeToken(s[i:])
				dst = appendMarshaledRune(dst, r)
				i += n
			}
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// The decoder reads a byte that is not UTF-8 as U+FFFD,
			// which is then written as it is.
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			start = i + 1
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = appendMarshaledSeparator(dst, r)
			start = i + size
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// unescapeToken reads the escape at the start of s as encoding/json does: a
// \u escape of half a surrogate pair takes the other half along, or is
// U+FFFD. It returns the rune and the bytes read.
func unescapeToken(s []byte) (rune, int) {
	if len(s) < 2 {
		return utf8.RuneError, len(s)
	}
	switch s[1] {
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
		r := hexQuad(s[2:])
		if r < 0 {
			return utf8.RuneError, len(s)
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if r2 := hexQuad(s[8:]); r2 >= 0 {
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					return pair, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return rune(s[1]), 2 // \" \\ \/
}

// hexQuad is the value of the four hex digits that start s, or -1.
func hexQuad(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
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

// appendMarshaledRune appends a decoded rune as encoding/json writes it.
func appendMarshaledRune(dst []byte, r rune) []byte {
	switch {
	case r < utf8.RuneSelf && marshalsAsIs(byte(r)):
		return append(dst, byte(r))
	case r < utf8.RuneSelf:
		return appendMarshaledASCII(dst, byte(r))
	case r == '\u2028' || r == '\u2029':
		return appendMarshaledSeparator(dst, r)
	}
	return utf8.AppendRune(dst, r)
}

// marshalsAsIs reports whether encoding/json writes the ASCII byte b as it is.
func marshalsAsIs(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

func appendMarshaledASCII(dst []byte, b byte) []byte {
	const hex = "0123456789abcdef"
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
}

func appendMarshaledSeparator(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', '2', '0', '2', byte('0'+r&0xF))
}

// JSONCursor reads one JSON document in a single strict pass: every
// value it reads or skips is checked against the grammar, so a document
// read up to End without Failed is valid JSON, as json.Valid says. It
// neither decodes nor allocates. A reader that meets what it does not
// expect (another type, a null, an unknown spelling) calls Fail; every
// later call then returns nothing, and the reader takes its encoding/json
// road, which reports or tolerates the document exactly as before.
//
// Objects and arrays are walked with FirstKey/NextKey and
// FirstElem/NextElem; each key or element must then be consumed by one
// of String, Int, Bool, Skip or a nested walk.
type JSONCursor struct {
	doc    []byte
	pos    int
	failed bool
}

// NewJSONCursor starts reading doc.
func NewJSONCursor(doc []byte) JSONCursor { return JSONCursor{doc: doc} }

// Fail stops the walk: the document is not one the reader expected.
func (c *JSONCursor) Fail() {
	c.failed, c.pos = true, len(c.doc)
}

// Failed reports whether the document was malformed or unexpected.
func (c *JSONCursor) Failed() bool { return c.failed }

// End reports whether the document was read whole and well: nothing but
// white space follows the value read.
func (c *JSONCursor) End() bool {
	return !c.failed && c.peek() == 0 && c.pos == len(c.doc)
}

// peek skips white space and returns the next byte, 0 at the end.
func (c *JSONCursor) peek() byte {
	for c.pos < len(c.doc) {
		switch b := c.doc[c.pos]; b {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return b
		}
	}
	return 0
}

// expect consumes the byte b, or fails.
func (c *JSONCursor) expect(b byte) bool {
	if c.peek() != b || b == 0 {
		c.Fail()
		return false
	}
	c.pos++
	return true
}

// FirstKey enters an object and returns its first key (raw, as between
// the quotes); false for an empty object or one that is not there.
func (c *JSONCursor) FirstKey() ([]byte, bool) {
	if !c.expect('{') {
		return nil, false
	}
	if c.peek() == '}' {
		c.pos++
		return nil, false
	}
	return c.key()
}

// NextKey returns the object's next key; false after its last member.
func (c *JSONCursor) NextKey() ([]byte, bool) {
	switch c.peek() {
	case '}':
		c.pos++
		return nil, false
	case ',':
		c.pos++
		return c.key()
	}
	c.Fail()
	return nil, false
}

func (c *JSONCursor) key() ([]byte, bool) {
	tok := c.StringToken()
	if tok == nil || !c.expect(':') {
		return nil, false
	}
	return tok[1 : len(tok)-1], true
}

// FirstElem enters an array; false for an empty array or none.
func (c *JSONCursor) FirstElem() bool {
	if !c.expect('[') {
		return false
	}
	if c.peek() == ']' {
		c.pos++
		return false
	}
	return true
}

// NextElem reports whether the array has another element.
func (c *JSONCursor) NextElem() bool {
	switch c.peek() {
	case ']':
		c.pos++
		return false
	case ',':
		c.pos++
		return true
	}
	c.Fail()
	return false
}

// StringToken consumes a string and returns its token, quotes included; nil
// (and the cursor fails) if the next value is not a well-formed string.
func (c *JSONCursor) StringToken() []byte {
	if c.peek() != '"' {
		c.Fail()
		return nil
	}
	b, start := c.doc, c.pos
	for i := start + 1; i < len(b); {
		switch ch := b[i]; {
		case ch == '"':
			c.pos = i + 1
			return b[start:c.pos]
		case ch == '\\':
			if i+1 >= len(b) {
				c.Fail()
				return nil
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hexQuad(b[i+2:]) < 0 {
					c.Fail()
					return nil
				}
				i += 6
			default:
				c.Fail()
				return nil
			}
		case ch < 0x20:
			c.Fail()
			return nil
		default:
			i++
		}
	}
	c.Fail()
	return nil
}

// Int consumes a number that is an integer of at most 18 digits, without
// fraction or exponent; any other value fails the cursor.
func (c *JSONCursor) Int() int64 {
	c.peek()
	b, i := c.doc, c.pos
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || digits > 18 || digits > 1 && b[start] == '0' || i < len(b) && !endsScalar(b[i]) {
		c.Fail()
		return 0
	}
	c.pos = i
	if neg {
		return -n
	}
	return n
}

// Bool consumes true or false.
func (c *JSONCursor) Bool() bool {
	switch c.peek() {
	case 't':
		return c.literal("true")
	case 'f':
		c.literal("false")
		return false
	}
	c.Fail()
	return false
}

func (c *JSONCursor) literal(lit string) bool {
	end := c.pos + len(lit)
	if end > len(c.doc) || string(c.doc[c.pos:end]) != lit || end < len(c.doc) && !endsScalar(c.doc[end]) {
		c.Fail()
		return false
	}
	c.pos = end
	return true
}

// endsScalar reports whether b may follow a number or a literal.
func endsScalar(b byte) bool {
	switch b {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// number consumes a number, checking the grammar.
func (c *JSONCursor) number() {
	b, i := c.doc, c.pos
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	first := i
	if n := digits(); n == 0 || n > 1 && b[first] == '0' {
		c.Fail()
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			c.Fail()
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			c.Fail()
			return
		}
	}
	if i < len(b) && !endsScalar(b[i]) {
		c.Fail()
		return
	}
	c.pos = i
}

// cursorMaxDepth bounds the nesting Skip follows; deeper documents (which
// encoding/json takes up to 10000 levels) go the slow road.
const cursorMaxDepth = 64

// Skip consumes any value, checking it, and returns its text.
func (c *JSONCursor) Skip() []byte {
	c.peek()
	start := c.pos
	var objects uint64 // bit d: the container at depth d+1 is an object
	depth := 0
	for !c.failed {
		// A value.
		switch c.peek() {
		case '{', '[':
			object := c.doc[c.pos] == '{'
			c.pos++
			if depth == cursorMaxDepth {
				c.Fail()
				return nil
			}
			closer := byte(']')
			if object {
				objects |= 1 << depth
				closer = '}'
			} else {
				objects &^= 1 << depth
			}
			depth++
			if c.peek() != closer {
				if object {
					c.key()
				}
				continue
			}
			c.pos++
			depth--
		case '"':
			c.StringToken()
		case 't':
			c.literal("true")
		case 'f':
			c.literal("false")
		case 'n':
			c.literal("null")
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			c.number()
		default:
			c.Fail()
		}
		// After a value: close the containers it ends, or go on to the
		// next member or element.
		for !c.failed {
			if depth == 0 {
				return c.doc[start:c.pos]
			}
			object := objects&(1<<(depth-1)) != 0
			switch c.peek() {
			case ',':
				c.pos++
				if object {
					c.key()
				}
			case '}', ']':
				if (c.doc[c.pos] == '}') != object {
					c.Fail()
					return nil
				}
				c.pos++
				depth--
				continue
			default:
				c.Fail()
			}
			break
		}
	}
	return nil
}

// KeyMayMean reports whether encoding/json could take key (raw, as
// between the quotes) for one of the fields names, a key that is not
// spelled exactly as any of them: it matches names without regard to
// case, folds some non-ASCII letters (ſ, K) to ASCII ones, and reads
// escapes. A reader gives such keys to encoding/json.
func KeyMayMean(key []byte, names ...string) bool {
	for _, b := range key {
		if b == '\\' || b >= utf8.RuneSelf {
			return true
		}
	}
	for _, name := range names {
		if len(name) == len(key) && foldEqualASCII(key, name) {
			return true
		}
	}
	return false
}

func foldEqualASCII(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
