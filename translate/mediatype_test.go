package translate

import (
	"mime"
	"testing"
)

// MediaType gives what mime.ParseMediaType gives, for any value.
func FuzzMediaType(f *testing.F) {
	for _, s := range []string{"application/json", "text/event-stream; charset=utf-8", "Application/JSON", " application/json",
		"application/json;", "multipart/form-data; boundary=x", "a/b/c", "/json", "application/", "application/vnd.api+json",
		"text/plain; a=1; a=2", "", "json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _, _ := mime.ParseMediaType(s)
		if got := MediaType(s); got != want {
			t.Fatalf("MediaType(%q) = %q, mime.ParseMediaType gives %q", s, got, want)
		}
	})
}
