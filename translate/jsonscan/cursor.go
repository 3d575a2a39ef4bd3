package jsonscan

import "unicode/utf8"

// Cursor reads one JSON document in a single strict pass, for the stream
// fast paths that read an event in place rather than decode it: every
// value it reads or skips is checked against the grammar, so a document
// read up to End without Failed is valid JSON, as json.Valid says. It
// neither decodes nor allocates. A reader that meets what it does not
// expect (another type, a null, an unknown spelling) calls Fail; every
// later call then returns nothing, and the reader takes its encoding/json
// road, which reports or tolerates the document exactly as before.
//
// Objects and arrays are walked with FirstKey/NextKey and
// FirstElem/NextElem; each key or element must then be consumed by one
// of StringToken, Int, Bool, Skip, SkipUnknown or a nested walk.
type Cursor struct {
	doc    []byte
	pos    int
	failed bool
}

// NewCursor starts reading doc.
func NewCursor(doc []byte) Cursor { return Cursor{doc: doc} }

// Valid reports whether data is one valid JSON value, as json.Valid does,
// in a fraction of its time (the fast paths check every event); it reports
// false for JSON nested deeper than 64 levels, which no stream event is.
func Valid(data []byte) bool {
	c := NewCursor(data)
	c.Skip()
	return c.End()
}

// Fail stops the walk: the document is not one the reader expected.
func (c *Cursor) Fail() {
	c.failed, c.pos = true, len(c.doc)
}

// End reports whether the document was read whole and well: nothing but
// white space follows the value read.
func (c *Cursor) End() bool {
	return !c.failed && c.peek() == 0 && c.pos == len(c.doc)
}

// Once fails the cursor when bit is already set in *seen, and sets it. A
// reader calls it for each member it reads: encoding/json would take the
// last of two members of one name, the reader the first.
func (c *Cursor) Once(seen *uint32, bit uint32) {
	if *seen&bit != 0 {
		c.Fail()
	}
	*seen |= bit
}

// SkipUnknown skips the value of a member the reader ignores, with the
// key it has, unless encoding/json might take that key for one of the
// fields names (see KeyMayMean): then it fails.
func (c *Cursor) SkipUnknown(key []byte, names []string) {
	if KeyMayMean(key, names...) {
		c.Fail()
		return
	}
	c.Skip()
}

// peek skips white space and returns the next byte, 0 at the end.
func (c *Cursor) peek() byte {
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
func (c *Cursor) expect(b byte) bool {
	if c.peek() != b || b == 0 {
		c.Fail()
		return false
	}
	c.pos++
	return true
}

// FirstKey enters an object and returns its first key (raw, as between
// the quotes); false for an empty object or one that is not there.
func (c *Cursor) FirstKey() ([]byte, bool) {
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
func (c *Cursor) NextKey() ([]byte, bool) {
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

func (c *Cursor) key() ([]byte, bool) {
	tok := c.StringToken()
	if tok == nil || !c.expect(':') {
		return nil, false
	}
	return tok[1 : len(tok)-1], true
}

// FirstElem enters an array; false for an empty array or none.
func (c *Cursor) FirstElem() bool {
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
func (c *Cursor) NextElem() bool {
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

// StringToken consumes a string and returns its token, quotes included;
// nil (and the cursor fails) if the next value is not a well-formed
// string. AppendTokenBody and Unquote read the token as encoding/json
// would.
func (c *Cursor) StringToken() []byte {
	if c.peek() != '"' {
		c.Fail()
		return nil
	}
	return c.take(validString(c.doc, c.pos))
}

// Int consumes a number that is an integer of at most 18 digits, without
// fraction or exponent; any other value fails the cursor.
func (c *Cursor) Int() int64 {
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
	if digits := i - start; digits == 0 || digits > 18 || digits > 1 && b[start] == '0' {
		c.Fail()
		return 0
	}
	c.pos = i // a fraction or exponent fails the cursor's next step
	if neg {
		return -n
	}
	return n
}

// Bool consumes true or false.
func (c *Cursor) Bool() bool {
	switch c.peek() {
	case 't':
		return c.take(validLiteral(c.doc, c.pos, "true")) != nil
	case 'f':
		c.take(validLiteral(c.doc, c.pos, "false"))
		return false
	}
	c.Fail()
	return false
}

// Skip consumes any value, checking it, and returns its text.
func (c *Cursor) Skip() []byte {
	c.peek()
	return c.take(validValue(c.doc, c.pos, 0))
}

// take consumes the value at the cursor, which a valid* function found
// to end at end, and returns its text; or it fails the cursor. Whatever
// follows the value is checked by the next step, which takes only white
// space, a comma, a closing bracket or the end.
func (c *Cursor) take(end int, ok bool) []byte {
	if !ok {
		c.Fail()
		return nil
	}
	v := c.doc[c.pos:end]
	c.pos = end
	return v
}

// maxDepth bounds the nesting Skip follows; deeper documents (which
// encoding/json takes up to 10000 levels) go the slow road.
const maxDepth = 64

// validValue checks the value at b[i] and returns the index after it;
// the other valid* functions check one kind of value. What may follow a
// value is left to the caller.
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
	if depth >= maxDepth {
		return i, false
	}
	object, end := b[i] == '{', byte(']')
	if object {
		end = '}'
	}
	i = SkipSpace(b, i+1)
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
			if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, false
			}
			i = SkipSpace(b, i+1)
		}
		if i, ok = validValue(b, i, depth+1); !ok {
			return i, false
		}
		if i = SkipSpace(b, i); i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
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

// KeyMayMean reports whether encoding/json could take key (raw, as
// between the quotes) for one of the fields names. It matches names
// without regard to case, folds some non-ASCII letters (ſ, K) to ASCII
// ones, and reads escapes, so a reader that meets a key it does not read
// and for which KeyMayMean is true leaves the document to encoding/json.
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

// PlainMembers finds the members of the JSON object obj (valid JSON, as
// Valid checks) named in names and puts each one's value at the
// name's index in vals (nil when absent, the value as it is, null
// included, when present). It reports false when obj is no object, or
// when encoding/json might match its keys otherwise than by exact name: a
// name given twice (the last one would win), or a key KeyMayMean
// is true of (encoding/json matches keys case-insensitively).
func PlainMembers(obj []byte, names []string, vals [][]byte) bool {
	clear(vals)
	it, ok := Entries(obj, SkipSpace(obj, 0))
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
		case i >= 0 || KeyMayMean(m.Key, names...):
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
