package services_test

import (
	"testing"

	"modelgate/extproc/guard"
	"modelgate/extproc/guard/services"
)

// contentSafetySpec and shieldsSpec are Azure AI Content Safety's specs
// but for their URL.
var (
	contentSafetySpec = services.Spec{Name: "azure", Type: "azure_content_safety", APIKey: key}
	shieldsSpec       = services.Spec{Name: "shields", Type: "azure_prompt_shields", APIKey: key}
)

// The text analysis client against its emulator (testContract).
func TestContentSafety(t *testing.T) {
	testContract(t, contract{spec: contentSafetySpec, credential: "Ocp-Apim-Subscription-Key"})
}

// The Prompt Shields client against its emulator, at either phase
// (testContract).
func TestPromptShields(t *testing.T) {
	for _, phase := range []guard.Phase{guard.Request, guard.Response} {
		t.Run(phase.String(), func(t *testing.T) {
			testContract(t, contract{spec: shieldsSpec, phase: phase, credential: "Ocp-Apim-Subscription-Key"})
		})
	}
}

// Both operations are called at their path with the API version, the
// key in Ocp-Apim-Subscription-Key (no bearer); Prompt Shields is sent
// a request's text as the user prompt, an answer's as a document.
func TestAzureRequest(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spec  services.Spec
		phase guard.Phase
		path  string
		body  string
	}{
		{"analyze", contentSafetySpec, guard.Response, "POST /contentsafety/text:analyze", `{"text":"hi","outputType":"FourSeverityLevels"}`},
		{"shield a request", shieldsSpec, guard.Request, "POST /contentsafety/text:shieldPrompt", `{"userPrompt":"hi","documents":[]}`},
		{"shield an answer", shieldsSpec, guard.Response, "POST /contentsafety/text:shieldPrompt", `{"userPrompt":"","documents":["hi"]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := testRequest(t, tt.spec, tt.phase, "hi")
			if got.path != tt.path || got.query != "api-version=2024-09-01" || got.body != tt.body ||
				got.header.Get("Ocp-Apim-Subscription-Key") != key || got.header.Get("Authorization") != "" {
				t.Errorf("call %+v, want %s?api-version=2024-09-01, body %s, the key in Ocp-Apim-Subscription-Key", got, tt.path, tt.body)
			}
		})
	}
}

// A category at the severity threshold (4 unless the spec says) or
// above flags the text; no category, or one without its severity, is an
// error.
func TestContentSafetyAnswers(t *testing.T) {
	answer := func(severity string) string {
		return `{"blocklistsMatch":[],"categoriesAnalysis":[{"category":"Hate","severity":0},{"category":"Violence","severity":` + severity + `}]}`
	}
	cases := []answerCase{
		{name: "below", answer: answer("2")},
		{name: "at", answer: answer("4"), want: guard.Verdict{Flagged: true}},
		{name: "above", answer: answer("6"), want: guard.Verdict{Flagged: true}},
		{name: "null", answer: `null`, wantErr: "answer has no categoriesAnalysis"},
		{name: "no categories", answer: `{"blocklistsMatch":[]}`, wantErr: "answer has no categoriesAnalysis"},
		{name: "empty categories", answer: `{"categoriesAnalysis":[]}`, wantErr: "answer has no categoriesAnalysis"},
		{name: "a null category", answer: `{"categoriesAnalysis":[null]}`, wantErr: "category 0 has no severity"},
		{name: "no severity", answer: `{"categoriesAnalysis":[{"category":"Hate"}]}`, wantErr: "category 0 has no severity"},
		{name: "null severity", answer: answer("null"), wantErr: "category 1 has no severity"},
	}
	testAnswers(t, contentSafetySpec, guard.Request, "some text", cases)
	t.Run("threshold 2", func(t *testing.T) {
		low := contentSafetySpec
		low.SeverityThreshold = 2
		testAnswers(t, low, guard.Request, "some text", []answerCase{{name: "at", answer: answer("2"), want: guard.Verdict{Flagged: true}}})
	})
	t.Run("threshold 6", func(t *testing.T) {
		high := contentSafetySpec
		high.SeverityThreshold = 6
		testAnswers(t, high, guard.Request, "some text", []answerCase{{name: "below", answer: answer("4")}})
	})
}

// Any attack detected flags the text; the analysis of what was sent (the
// user prompt at the request phase, the one document at the response
// phase) is required, and every analysis needs its attackDetected.
func TestPromptShieldsAnswers(t *testing.T) {
	testAnswers(t, shieldsSpec, guard.Request, "some text", []answerCase{
		{name: "no attack", answer: `{"userPromptAnalysis":{"attackDetected":false},"documentsAnalysis":[]}`},
		{name: "attack", answer: `{"userPromptAnalysis":{"attackDetected":true},"documentsAnalysis":[]}`, want: guard.Verdict{Flagged: true}},
		{name: "no documentsAnalysis", answer: `{"userPromptAnalysis":{"attackDetected":false}}`},
		{name: "null", answer: `null`, wantErr: "answer has no userPromptAnalysis"},
		{name: "no userPromptAnalysis", answer: `{"documentsAnalysis":[]}`, wantErr: "answer has no userPromptAnalysis"},
		{name: "no attackDetected", answer: `{"userPromptAnalysis":{}}`, wantErr: "an analysis has no attackDetected"},
		{name: "a null document analysis", answer: `{"userPromptAnalysis":{"attackDetected":false},"documentsAnalysis":[null]}`, wantErr: "an analysis has no attackDetected"},
	})
	t.Run("response", func(t *testing.T) {
		testAnswers(t, shieldsSpec, guard.Response, "some text", []answerCase{
			{name: "no attack", answer: `{"userPromptAnalysis":{"attackDetected":false},"documentsAnalysis":[{"attackDetected":false}]}`},
			{name: "attack", answer: `{"documentsAnalysis":[{"attackDetected":true}]}`, want: guard.Verdict{Flagged: true}},
			{name: "no documentsAnalysis", answer: `{"userPromptAnalysis":{"attackDetected":false}}`, wantErr: "answer has 0 documentsAnalysis, not 1"},
			{name: "two documentsAnalysis", answer: `{"documentsAnalysis":[{"attackDetected":false},{"attackDetected":false}]}`, wantErr: "answer has 2 documentsAnalysis, not 1"},
			{name: "no attackDetected", answer: `{"documentsAnalysis":[{}]}`, wantErr: "an analysis has no attackDetected"},
		})
	})
}
