package guards_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// azureKey is a header with an Azure subscription key.
func azureKey() http.Header { return http.Header{"Ocp-Apim-Subscription-Key": {"k"}} }

// The Azure emulators refuse a request without the subscription key
// (401) or the api-version (404) in Azure's error shape, and one
// without the text (400).
func TestAzureRefusals(t *testing.T) {
	for _, path := range []string{"/contentsafety/text:analyze", "/contentsafety/text:shieldPrompt"} {
		for _, tt := range []struct {
			name, query, body string
			header            http.Header
			status            int
		}{
			{"no key", "?api-version=2024-09-01", `{"text":"a","userPrompt":"a"}`, nil, 401},
			{"no api-version", "", `{"text":"a","userPrompt":"a"}`, azureKey(), 404},
			{"no text", "?api-version=2024-09-01", `{}`, azureKey(), 400},
			{"not JSON", "?api-version=2024-09-01", `{`, azureKey(), 400},
		} {
			t.Run(path+"/"+tt.name, func(t *testing.T) {
				status, b := post(t, path+tt.query, tt.header, tt.body)
				var none struct{}
				checkStatus(t, status, tt.status, b, &none)
				if e := decode[map[string]map[string]string](t, b)["error"]; e["code"] == "" || e["message"] == "" {
					t.Errorf("error %s, want Azure's {error: {code, message}}", b)
				}
			})
		}
	}
}

// The text analysis emulator rates Violence 6 where the text matches
// Flagged, every other category 0, with no blocklist matches.
func TestContentSafety(t *testing.T) {
	type category struct {
		Category string
		Severity int
	}
	type answer struct {
		BlocklistsMatch    []any `json:"blocklistsMatch"`
		CategoriesAnalysis []category
	}
	for _, tt := range []struct {
		name, text string
		violence   int
	}{
		{"clean", "hello", 0},
		{"flagged", "Grüße zebra-42", 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got answer
			status, b := post(t, "/contentsafety/text:analyze?api-version=2024-09-01", azureKey(), `{"text":"`+tt.text+`","outputType":"FourSeverityLevels"}`)
			checkStatus(t, status, 200, b, &got)
			want := answer{[]any{}, []category{{"Hate", 0}, {"SelfHarm", 0}, {"Sexual", 0}, {"Violence", tt.violence}}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

// The Prompt Shields emulator detects an attack in the user prompt and
// in each document that matches Flagged.
func TestPromptShields(t *testing.T) {
	type analysis struct {
		AttackDetected bool `json:"attackDetected"`
	}
	type answer struct {
		UserPromptAnalysis analysis   `json:"userPromptAnalysis"`
		DocumentsAnalysis  []analysis `json:"documentsAnalysis"`
	}
	for _, tt := range []struct {
		name, body string
		want       answer
	}{
		{"clean prompt", `{"userPrompt":"hello","documents":[]}`, answer{analysis{false}, []analysis{}}},
		{"attack in the prompt", `{"userPrompt":"zebra-42","documents":[]}`, answer{analysis{true}, []analysis{}}},
		{"attack in a document", `{"userPrompt":"","documents":["hello","forbidden-word"]}`, answer{analysis{false}, []analysis{{false}, {true}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got answer
			status, b := post(t, "/contentsafety/text:shieldPrompt?api-version=2024-09-01", azureKey(), tt.body)
			checkStatus(t, status, 200, b, &got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}
