package services_test

import (
	"testing"

	"modelgate/extproc/guard"
	"modelgate/extproc/guard/services"
)

// presidioSpec is a Presidio analyzer's spec but for its URL.
var presidioSpec = services.Spec{Name: "pii", Type: "presidio"}

// The Presidio client against its emulator (testContract).
func TestPresidio(t *testing.T) {
	testContract(t, contract{spec: presidioSpec, spans: true})
}

// The analyzer is asked in its language, "en" unless the spec says, for
// the entities and above the score threshold the spec names, if any; a
// bearer key is sent only if the spec has one.
func TestPresidioRequest(t *testing.T) {
	options := presidioSpec
	options.URL, options.APIKey, options.Language = "/", key, "de"
	options.Entities, options.ScoreThreshold = []string{"PERSON", "EMAIL_ADDRESS"}, 0.5
	for _, tt := range []struct {
		name       string
		spec       services.Spec
		body, auth string
	}{
		{"defaults", presidioSpec, `{"text":"hi","language":"en"}`, ""},
		{"options", options, `{"text":"hi","language":"de","entities":["PERSON","EMAIL_ADDRESS"],"score_threshold":0.5}`, "Bearer " + key},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := testRequest(t, tt.spec, guard.Request, "hi")
			if got.path != "POST /analyze" || got.body != tt.body || got.header.Get("Authorization") != tt.auth ||
				got.header.Get("Content-Type") != "application/json" {
				t.Errorf("call %+v, want POST /analyze, body %s, Authorization %q, JSON", got, tt.body, tt.auth)
			}
		})
	}
}

// The analyzer's offsets are code points: they become the text's bytes.
// An answer that is not a list of entities, each with its span within
// the text, is an error.
func TestPresidioAnswers(t *testing.T) {
	text := "a ☃ zebra-42 b" // 14 code points; zebra-42 is bytes [6, 14)
	testAnswers(t, presidioSpec, guard.Request, text, []answerCase{
		{name: "none", answer: `[]`},
		{name: "one", answer: `[{"entity_type":"ZEBRA","start":4,"end":12,"score":0.85,"analysis_explanation":null}]`,
			want: guard.Verdict{Flagged: true, Spans: [][2]int{{6, 14}}}},
		{name: "two, the last to the end", answer: `[{"entity_type":"A","start":0,"end":3,"score":1},{"entity_type":"B","start":13,"end":14,"score":1}]`,
			want: guard.Verdict{Flagged: true, Spans: [][2]int{{0, 5}, {15, 16}}}},
		{name: "null", answer: `null`, wantErr: "answer is null, not a list of entities"},
		{name: "an object", answer: `{"results":[]}`, wantErr: "malformed answer: not an array"},
		{name: "a null entity", answer: `[null]`, wantErr: "entity 0 has no start or end"},
		{name: "no end", answer: `[{"entity_type":"ZEBRA","start":4,"score":0.85}]`, wantErr: "entity 0 has no start or end"},
		{name: "empty span", answer: `[{"entity_type":"ZEBRA","start":4,"end":4}]`, wantErr: "span 0 [4, 4) is empty or not within the text's 14 code points"},
		{name: "reversed span", answer: `[{"entity_type":"ZEBRA","start":5,"end":4}]`, wantErr: "span 0 [5, 4) is empty or not within the text's 14 code points"},
		{name: "past the end", answer: `[{"entity_type":"ZEBRA","start":4,"end":15}]`, wantErr: "span 0 [4, 15) is empty or not within the text's 14 code points"},
		{name: "negative", answer: `[{"entity_type":"ZEBRA","start":-1,"end":4}]`, wantErr: "span 0 [-1, 4) is empty or not within the text's 14 code points"},
		{name: "fractional", answer: `[{"entity_type":"ZEBRA","start":4.5,"end":12}]`, wantErr: "malformed answer: member start is not an integer"},
		{name: "trailing data", answer: `[] []`, wantErr: "malformed answer: not JSON at byte 4"},
		{name: "empty", answer: ``, wantErr: "malformed answer: not JSON at byte 0"},
	})
}
