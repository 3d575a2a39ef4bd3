package services_test

import (
	"testing"

	"modelgate/extproc/guard"
	"modelgate/extproc/guard/services"
)

// lakeraSpec is a Lakera Guard's spec but for its URL.
var lakeraSpec = services.Spec{Name: "lakera", Type: "lakera", APIKey: key}

// The Lakera Guard client against its emulator, at either phase
// (testContract).
func TestLakera(t *testing.T) {
	for _, phase := range []guard.Phase{guard.Request, guard.Response} {
		t.Run(phase.String(), func(t *testing.T) {
			testContract(t, contract{spec: lakeraSpec, phase: phase, credential: "Authorization"})
		})
	}
}

// Lakera Guard is sent the text as the user's message at the request
// phase, the assistant's at the response phase, with the bearer key and
// the project if the spec names one.
func TestLakeraRequest(t *testing.T) {
	project := lakeraSpec
	project.ProjectID = "project-7"
	for _, tt := range []struct {
		name  string
		spec  services.Spec
		phase guard.Phase
		body  string
	}{
		{"request", lakeraSpec, guard.Request, `{"messages":[{"role":"user","content":"hi"}]}`},
		{"response", lakeraSpec, guard.Response, `{"messages":[{"role":"assistant","content":"hi"}]}`},
		{"project", project, guard.Request, `{"messages":[{"role":"user","content":"hi"}],"project_id":"project-7"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := testRequest(t, tt.spec, tt.phase, "hi")
			if got.path != "POST /v2/guard" || got.body != tt.body || got.header.Get("Authorization") != "Bearer "+key {
				t.Errorf("call %+v, want POST /v2/guard, body %s, the bearer key", got, tt.body)
			}
		})
	}
}

// The answer's flagged is the verdict; without it, the answer is an
// error.
func TestLakeraAnswers(t *testing.T) {
	testAnswers(t, lakeraSpec, guard.Request, "some text", []answerCase{
		{name: "not flagged", answer: `{"flagged":false,"metadata":{"request_uuid":"u"}}`},
		{name: "flagged", answer: `{"flagged":true,"breakdown":[]}`, want: guard.Verdict{Flagged: true}},
		{name: "null", answer: `null`, wantErr: "answer has no flagged"},
		{name: "no flagged", answer: `{"metadata":{}}`, wantErr: "answer has no flagged"},
		{name: "null flagged", answer: `{"flagged":null}`, wantErr: "answer has no flagged"},
		{name: "flagged a number", answer: `{"flagged":1}`, wantErr: "malformed answer: member flagged is not a boolean"},
		{name: "not JSON", answer: `flagged`, wantErr: "malformed answer: not JSON at byte 2"},
	})
}
