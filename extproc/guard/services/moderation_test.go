package services_test

import (
	"testing"

	"modelgate/extproc/guard"
	"modelgate/extproc/guard/services"
)

// moderationSpec is an OpenAI moderation endpoint's spec but for its URL.
var moderationSpec = services.Spec{Name: "openai", Type: "openai_moderation", APIKey: key}

// The moderation client against its emulator (testContract).
func TestModeration(t *testing.T) {
	testContract(t, contract{spec: moderationSpec, credential: "Authorization"})
}

// The endpoint is asked with the bearer key, for the spec's model,
// omni-moderation-latest unless it says.
func TestModerationRequest(t *testing.T) {
	model := moderationSpec
	model.Model = "text-moderation-stable"
	for _, tt := range []struct {
		name string
		spec services.Spec
		body string
	}{
		{"default model", moderationSpec, `{"model":"omni-moderation-latest","input":"hi"}`},
		{"model", model, `{"model":"text-moderation-stable","input":"hi"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := testRequest(t, tt.spec, guard.Request, "hi")
			if got.path != "POST /v1/moderations" || got.body != tt.body || got.header.Get("Authorization") != "Bearer "+key {
				t.Errorf("call %+v, want POST /v1/moderations, body %s, the bearer key", got, tt.body)
			}
		})
	}
}

// Any result flagged flags the text; no result, or one without its
// flag, is an error.
func TestModerationAnswers(t *testing.T) {
	testAnswers(t, moderationSpec, guard.Request, "some text", []answerCase{
		{name: "not flagged", answer: `{"id":"modr-1","model":"m","results":[{"flagged":false,"categories":{"hate":false}}]}`},
		{name: "flagged", answer: `{"results":[{"flagged":true,"categories":{"hate":true},"category_scores":{"hate":0.9}}]}`,
			want: guard.Verdict{Flagged: true}},
		{name: "the second flagged", answer: `{"results":[{"flagged":false},{"flagged":true}]}`, want: guard.Verdict{Flagged: true}},
		{name: "null", answer: `null`, wantErr: "answer has no results"},
		{name: "no results", answer: `{"id":"modr-1"}`, wantErr: "answer has no results"},
		{name: "null results", answer: `{"results":null}`, wantErr: "answer has no results"},
		{name: "empty results", answer: `{"results":[]}`, wantErr: "answer has no results"},
		{name: "a null result", answer: `{"results":[null]}`, wantErr: "result 0 has no flagged"},
		{name: "no flagged", answer: `{"results":[{"categories":{}}]}`, wantErr: "result 0 has no flagged"},
		{name: "flagged a string", answer: `{"results":[{"flagged":"true"}]}`, wantErr: "malformed answer: member results.flagged is not a boolean"},
		{name: "a list", answer: `[{"flagged":true}]`, wantErr: "malformed answer: not an object"},
	})
}
