package guards

import (
	"encoding/json"
	"net/http"
)

func init() {
	routes = append(routes, route{"POST /contentsafety/text:analyze", contentSafety},
		route{"POST /contentsafety/text:shieldPrompt", promptShields})
}

// azureCategories are the text analysis's harm categories.
var azureCategories = []string{"Hate", "SelfHarm", "Sexual", "Violence"}

// azureError is Azure AI Content Safety's error shape.
func azureError(code, message string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": message}}
}

// azureRefused answers for Azure's gateway when r has no subscription
// key (401) or no api-version (404), and says whether it did.
func azureRefused(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Header.Get("Ocp-Apim-Subscription-Key") == "":
		reply(w, http.StatusUnauthorized, azureError("401", "Access denied due to invalid subscription key or wrong API endpoint. "+
			"Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."))
	case r.URL.Query().Get("api-version") == "":
		reply(w, http.StatusNotFound, azureError("404", "Resource not found"))
	default:
		return false
	}
	return true
}

// contentSafety answers as Azure AI Content Safety's text analysis (POST
// /contentsafety/text:analyze): each category's severity, Violence's 6
// where the text matches Flagged, the others 0, and no blocklist
// matches.
func contentSafety(w http.ResponseWriter, r *http.Request) {
	if azureRefused(w, r) {
		return
	}
	var req struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Text == "" {
		reply(w, http.StatusBadRequest, azureError("InvalidRequestBody", "The request body is invalid: text is required."))
		return
	}
	analysis := make([]map[string]any, len(azureCategories))
	for i, c := range azureCategories {
		severity := 0
		if c == "Violence" && Flagged.MatchString(req.Text) {
			severity = 6
		}
		analysis[i] = map[string]any{"category": c, "severity": severity}
	}
	reply(w, http.StatusOK, map[string]any{"blocklistsMatch": []any{}, "categoriesAnalysis": analysis})
}

// shieldAnalysis is one Prompt Shields analysis.
type shieldAnalysis struct {
	AttackDetected bool `json:"attackDetected"`
}

// promptShields answers as Azure AI Content Safety's Prompt Shields
// (POST /contentsafety/text:shieldPrompt): an attack detected in the
// user prompt and in each document that matches Flagged.
func promptShields(w http.ResponseWriter, r *http.Request) {
	if azureRefused(w, r) {
		return
	}
	var req struct {
		UserPrompt string   `json:"userPrompt"`
		Documents  []string `json:"documents"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.UserPrompt == "" && len(req.Documents) == 0 {
		reply(w, http.StatusBadRequest, azureError("InvalidRequestBody", "The request body is invalid: userPrompt or documents is required."))
		return
	}
	docs := make([]shieldAnalysis, len(req.Documents))
	for i, d := range req.Documents {
		docs[i] = shieldAnalysis{Flagged.MatchString(d)}
	}
	reply(w, http.StatusOK, map[string]any{"userPromptAnalysis": shieldAnalysis{Flagged.MatchString(req.UserPrompt)},
		"documentsAnalysis": docs})
}
