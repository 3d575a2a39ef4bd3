package translate

import (
	"mime"
	"strings"
)

// MediaType is a Content-Type's media type, lower case and without
// parameters, as mime.ParseMediaType gives it ("" when that fails). The
// usual value, a plain lower-case type/subtype such as
// "application/json", is returned as it is, without the parse and its
// allocations.
func MediaType(contentType string) string {
	if plainMediaType(contentType) {
		return contentType
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

// plainMediaType reports whether s is type/subtype of lower-case letters,
// digits, '-', '.' and '+' alone: what mime.ParseMediaType gives back
// unchanged.
func plainMediaType(s string) bool {
	slash := strings.IndexByte(s, '/')
	if slash <= 0 || slash == len(s)-1 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case i == slash, 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '+':
		default:
			return false
		}
	}
	return true
}
