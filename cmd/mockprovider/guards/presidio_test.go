package guards_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The Presidio emulator finds Flagged matches and email addresses at
// code point offsets, by start, of the entities asked for and at the
// score threshold or above, and fails as the analyzer does without a
// text or a language.
func TestPresidio(t *testing.T) {
	type entity struct {
		EntityType string `json:"entity_type"`
		Start, End int
		Score      float64
	}
	text := "Grüße, ☃ at a@b.example: zebra-42"
	all := []entity{{"EMAIL_ADDRESS", 12, 23, 1}, {"ZEBRA", 25, 33, 0.85}}
	for _, tt := range []struct {
		name, body string
		status     int
		want       []entity
	}{
		{"clean", `{"text":"hello","language":"en"}`, 200, []entity{}},
		{"all", `{"text":"` + text + `","language":"en"}`, 200, all},
		{"entities asked for", `{"text":"` + text + `","language":"en","entities":["ZEBRA"]}`, 200, all[1:]},
		{"score threshold", `{"text":"` + text + `","language":"en","score_threshold":0.9}`, 200, all[:1]},
		{"no language", `{"text":"hello"}`, 500, nil},
		{"no text", `{"text":"","language":"en"}`, 500, nil},
		{"not JSON", `[`, 400, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []entity
			status, b := post(t, "/analyze", nil, tt.body)
			checkStatus(t, status, tt.status, b, &got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("entities (-want +got):\n%s", diff)
			}
		})
	}
	for _, e := range all {
		if got, want := codePointText(text, e.Start, e.End), map[string]string{"ZEBRA": "zebra-42", "EMAIL_ADDRESS": "a@b.example"}[e.EntityType]; got != want {
			t.Errorf("%s at [%d, %d) of %q is %q, want %q", e.EntityType, e.Start, e.End, text, got, want)
		}
	}
}
