package jsonscan

import (
	"bytes"
	"strings"
)

// AmbiguousKeys reports whether an object anywhere in doc, valid JSON,
// has two members whose names encoding/json could take for one field:
// equal once unescaped and compared without regard to case (the same name
// twice included). Parsers read such a document differently: encoding/json
// takes the last of them whatever its case, most providers the last of
// the exact name, so what the gateway reads may not be what a provider
// reads. Malformed text reports false.
func AmbiguousKeys(doc []byte) bool {
	return ambiguousIn(doc, SkipSpace(doc, 0), 0)
}

// maxAmbiguousDepth bounds the nesting AmbiguousKeys follows: deeper
// than encoding/json's own limit of 10,000 is no request.
const maxAmbiguousDepth = 10000

func ambiguousIn(doc []byte, at, depth int) bool {
	it, ok := Entries(doc, at)
	if !ok || depth > maxAmbiguousDepth {
		return false
	}
	var seen map[string]bool
	var first string // most objects have few members: a map only past one
	for n := 0; ; n++ {
		m, more := it.Next()
		if !more {
			return false
		}
		if k := Kind(m.Value); (k == '{' || k == '[') && ambiguousIn(doc, m.VS, depth+1) {
			return true
		}
		if !it.Object {
			continue
		}
		key := foldKey(m.Key)
		switch {
		case n == 0:
			first = key
		case seen == nil:
			if key == first {
				return true
			}
			seen = map[string]bool{first: true, key: true}
		case seen[key]:
			return true
		default:
			seen[key] = true
		}
	}
}

// foldKey is a member's name unescaped and case-folded, so that names
// encoding/json takes for one field fold the same.
func foldKey(key []byte) string {
	if bytes.IndexByte(key, '\\') >= 0 {
		var scratch []byte
		key = Unquote(append(append([]byte{'"'}, key...), '"'), &scratch)
	}
	return strings.ToUpper(strings.ToLower(string(key)))
}
