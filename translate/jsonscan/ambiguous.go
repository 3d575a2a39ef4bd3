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
	// Most objects have a few members: compared pairwise, on the stack;
	// past that, by folded name in a map.
	var few [16][]byte
	n := 0
	var many map[string]bool
	for {
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
		key := m.Key
		if bytes.IndexByte(key, '\\') >= 0 {
			var scratch []byte
			key = Unquote(append(append([]byte{'"'}, key...), '"'), &scratch)
		}
		if n < len(few) {
			for _, k := range few[:n] {
				if bytes.EqualFold(k, key) {
					return true
				}
			}
			few[n] = key
			n++
			continue
		}
		if many == nil {
			many = make(map[string]bool, 2*len(few))
			for _, k := range few {
				many[fold(k)] = true
			}
		}
		f := fold(key)
		if many[f] {
			return true
		}
		many[f] = true
	}
}

// fold is a member's name case-folded, so that names bytes.EqualFold
// takes for one fold the same.
func fold(key []byte) string {
	return strings.ToUpper(strings.ToLower(string(key)))
}
