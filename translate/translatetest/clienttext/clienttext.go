// Package clienttext reads what a client got in tests: the JSON
// documents of an answer and every string in them, without the flags of
// package translatetest (a test binary may define its own).
package clienttext

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate/sse"
)

// Docs are the JSON documents of an answer: the body, or each event's
// data of a stream but the closing [DONE].
func Docs(out []byte, stream bool) [][]byte {
	if !stream {
		return [][]byte{out}
	}
	var docs [][]byte
	var dec sse.Decoder
	for _, ev := range dec.Feed(out) {
		if string(ev.Data) != "[DONE]" {
			docs = append(docs, ev.Data)
		}
	}
	return docs
}

// Strings are every JSON string of an answer's documents (Docs), one a
// line: where a test looks for text that must reach no client in any
// member, event or repeat.
func Strings(t testing.TB, out []byte, stream bool) string {
	t.Helper()
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v + "\n")
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for _, d := range Docs(out, stream) {
		var v any
		if err := json.Unmarshal(d, &v); err != nil {
			t.Fatalf("not JSON: %q", d)
		}
		walk(v)
	}
	return b.String()
}
