package extproc

import (
	"encoding/json"
	"testing"
)

// maxOutputTokens reads a member as encoding/json would, for any valid
// JSON value.
func FuzzMaxOutputTokens(f *testing.F) {
	for _, s := range []string{`100`, ` 7 `, `0`, `-3`, `1.0`, `1e3`, `null`, `"5"`, `9223372036854775807`, `9223372036854775808`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		var want int64
		if json.Unmarshal(raw, &want) != nil || want < 0 {
			want = 0
		}
		if got := maxOutputTokens(map[string]json.RawMessage{"max_tokens": raw}); got != want {
			t.Fatalf("maxOutputTokens(%s) = %d, want %d", raw, got, want)
		}
	})
}
