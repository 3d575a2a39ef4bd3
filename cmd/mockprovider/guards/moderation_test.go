package guards_test

import (
	"testing"
)

// The moderation emulator answers a result per input, flagged with
// harassment where the input matches Flagged, refuses a request without
// a bearer key with OpenAI's 401 and an input it cannot read with 400.
func TestModeration(t *testing.T) {
	type result struct {
		Flagged        bool
		Categories     map[string]bool
		CategoryScores map[string]float64 `json:"category_scores"`
	}
	type answer struct {
		ID, Model string
		Results   []result
	}
	for _, tt := range []struct {
		name, body string
		noKey      bool
		status     int
		model      string
		flagged    []bool
	}{
		{"clean", `{"input":"hello"}`, false, 200, "omni-moderation-latest", []bool{false}},
		{"flagged", `{"model":"m","input":"say ZEBRA-9"}`, false, 200, "m", []bool{true}},
		{"strings", `{"input":["hello","forbidden-word"]}`, false, 200, "omni-moderation-latest", []bool{false, true}},
		{"parts", `{"input":[{"type":"text","text":"zebra-1"},{"type":"image_url","image_url":{"url":"x"}}]}`, false, 200,
			"omni-moderation-latest", []bool{true}},
		{"no input", `{"model":"m"}`, false, 400, "", nil},
		{"null input", `{"input":null}`, false, 400, "", nil},
		{"no key", `{"input":"hello"}`, true, 401, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			header := bearer()
			if tt.noKey {
				header = nil
			}
			var got answer
			status, b := post(t, "/v1/moderations", header, tt.body)
			checkStatus(t, status, tt.status, b, &got)
			if status != 200 {
				if e := decode[map[string]map[string]any](t, b)["error"]; e["type"] != "invalid_request_error" {
					t.Errorf("error %s, want OpenAI's shape", b)
				}
				return
			}
			if got.ID == "" || got.Model != tt.model || len(got.Results) != len(tt.flagged) {
				t.Fatalf("answer %s, want model %q and %d results", b, tt.model, len(tt.flagged))
			}
			for i, r := range got.Results {
				if r.Flagged != tt.flagged[i] || r.Categories["harassment"] != tt.flagged[i] || len(r.Categories) != 13 || len(r.CategoryScores) != 13 {
					t.Errorf("result %d %+v, want flagged %v (harassment) in 13 categories", i, r, tt.flagged[i])
				}
			}
		})
	}
}
