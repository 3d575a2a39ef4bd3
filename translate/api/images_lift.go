package api

import (
	"bytes"
	"strconv"
)

// Image answers are megabytes of base64 in a few hundred bytes of JSON.
// encoding/json scans every byte of a string it decodes, twice, and copies
// it; lifting the base64 out first lets it decode the small rest while the
// images stay slices of the body, copied once, into the client's answer.

// minLifted is the shortest string worth lifting: an image, not a word.
const minLifted = 1024

// placeholderPrefix starts the string that stands in for a lifted value.
// A NUL never occurs in base64 and hardly in a provider's JSON; were a
// provider to send such a string, only its own images could be confused.
const placeholderPrefix = `"\u0000lifted:`

// Lifted holds the base64 strings cut out of a JSON body.
type Lifted struct {
	values [][]byte
}

// LiftBase64 replaces every JSON string of body that is at least minLifted
// bytes of padded base64 with a short placeholder string, and returns the
// smaller body. It does not validate body; decoding the result does, and a
// body is valid exactly when the result is.
func LiftBase64(body []byte) ([]byte, *Lifted) {
	l := &Lifted{}
	var out []byte
	last, i := 0, 0
	for {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			break
		}
		start := i + q
		end := closingQuote(body, start)
		if end < 0 {
			break
		}
		if s := body[start+1 : end]; len(s) >= minLifted && isBase64(s) {
			if out == nil {
				out = make([]byte, 0, 1024)
			}
			out = append(out, body[last:start]...)
			out = append(out, placeholderPrefix...)
			out = strconv.AppendInt(out, int64(len(l.values)), 10)
			out = append(out, '"')
			l.values = append(l.values, s)
			last = end + 1
		}
		i = end + 1
	}
	if out == nil {
		return body, l
	}
	return append(out, body[last:]...), l
}

// closingQuote returns the index of the quote that ends the string opened
// at body[start], or -1.
func closingQuote(body []byte, start int) int {
	for j := start + 1; ; {
		k := bytes.IndexByte(body[j:], '"')
		if k < 0 {
			return -1
		}
		end := j + k
		backslashes := 0
		for p := end - 1; p > start && body[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return end
		}
		j = end + 1
	}
}

// Value returns the lifted base64 a decoded string stands for, or the
// string itself when it is no placeholder.
func (l *Lifted) Value(s string) []byte {
	if rest, ok := cutPlaceholder(s); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 && n < len(l.values) {
			return l.values[n]
		}
	}
	return []byte(s)
}

func cutPlaceholder(s string) (string, bool) {
	const decoded = "\x00lifted:"
	if len(s) > len(decoded) && s[:len(decoded)] == decoded {
		return s[len(decoded):], true
	}
	return "", false
}

// Restore puts the lifted strings back into JSON that carries their
// placeholders as encoding/json writes them.
func (l *Lifted) Restore(body []byte) []byte {
	if len(l.values) == 0 || !bytes.Contains(body, []byte(placeholderPrefix)) {
		return body
	}
	size := len(body)
	for _, v := range l.values {
		size += len(v)
	}
	out := make([]byte, 0, size)
	for {
		k := bytes.Index(body, []byte(placeholderPrefix))
		if k < 0 {
			return append(out, body...)
		}
		rest := body[k+len(placeholderPrefix):]
		digits := 0
		for digits < len(rest) && '0' <= rest[digits] && rest[digits] <= '9' {
			digits++
		}
		n, err := strconv.Atoi(string(rest[:digits]))
		if err != nil || digits == len(rest) || rest[digits] != '"' || n >= len(l.values) {
			out = append(out, body[:k+len(placeholderPrefix)]...)
			body = rest
			continue
		}
		out = append(out, body[:k]...)
		out = append(out, '"')
		out = append(out, l.values[n]...)
		out = append(out, '"')
		body = rest[digits+1:]
	}
}
