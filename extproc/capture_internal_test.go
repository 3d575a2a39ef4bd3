package extproc

import (
	"strings"
	"testing"
)

// FuzzRedaction: any body, cut or whole, never panics and never keeps a
// key-like string or the value of a member the rules name.
func FuzzRedaction(f *testing.F) {
	f.Add([]byte(`{"content":"SECRET","x":"sk-abcdefghijklmnopqrstu"}`), false)
	f.Add([]byte("data: {\"content\":\"SECRET\"}\n\ndata: [DONE]\n\n"), true)
	f.Add([]byte(`[{"a":{"content":["SECRET"]}}]`), false)
	f.Add([]byte("plain text sk-abcdefghijklmnopqrstu"), false)
	r := Redaction{Members: []string{"content"}}
	f.Fuzz(func(t *testing.T, body []byte, truncated bool) {
		out := r.apply(body, truncated)
		if keyLike.MatchString(out) {
			t.Fatalf("%q kept a key-like string: %q", body, out)
		}
		if strings.Contains(string(body), `"content":"SECRET"`) && strings.Contains(out, "SECRET") {
			t.Fatalf("%q kept a redacted member's value: %q", body, out)
		}
	})
}
