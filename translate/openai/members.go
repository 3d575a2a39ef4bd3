package openai

import "bytes"

// member is one top-level member of a JSON object: the key (without
// quotes, unescaped only if it had no escapes) and where the member's text
// starts and ends, including its leading comma or whitespace.
type member struct {
	key        []byte
	value      []byte
	start, end int
}

// topMembers lists the top-level members of a JSON object without decoding
// values. obj must be valid JSON (json.Valid); it returns false if obj is
// not an object.
func topMembers(obj []byte, out []member) ([]member, bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return out, false
	}
	i++
	for {
		start := i
		i = skipSpace(obj, i)
		if i < len(obj) && obj[i] == '}' {
			return out, true
		}
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		if i >= len(obj) || obj[i] != '"' {
			return out, false
		}
		keyEnd := skipString(obj, i)
		if keyEnd < i+2 || obj[keyEnd-1] != '"' {
			return out, false
		}
		key := obj[i+1 : keyEnd-1]
		i = skipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return out, false
		}
		vs := skipSpace(obj, i+1)
		ve := skipValue(obj, vs)
		if ve <= vs {
			return out, false
		}
		out = append(out, member{key: key, value: obj[vs:ve], start: start, end: ve})
		i = ve
	}
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
	for j < len(b) && !bytes.ContainsRune([]byte(",}] \n\r\t"), rune(b[j])) {
		j++
	}
	return j
}

// dropMembers appends obj to dst without the members for which drop is
// true, keeping every other byte as it was.
func dropMembers(dst, obj []byte, members []member, drop func(m member) bool) []byte {
	prev := 0
	first := true // whether the next kept member is the first: it must lose a leading comma
	for _, m := range members {
		if drop(m) {
			dst = append(dst, obj[prev:m.start]...)
			prev = m.end
			continue
		}
		seg := obj[prev:m.end]
		if first && prev != 0 {
			// the kept member follows only dropped ones: remove its comma
			if k := bytes.IndexByte(obj[m.start:m.end], ','); k >= 0 && k < bytes.IndexByte(obj[m.start:m.end], '"') {
				dst = append(dst, obj[prev:m.start]...)
				seg = obj[m.start+k+1 : m.end]
			}
		}
		dst = append(dst, seg...)
		prev = m.end
		first = false
	}
	return append(dst, obj[prev:]...)
}

func isNullValue(v []byte) bool { return bytes.Equal(v, []byte("null")) }
