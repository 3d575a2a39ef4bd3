package guards

import (
	"encoding/json"
	"net/http"
	"strings"
)

func init() {
	// A wildcard is a whole segment: the verb, after the template's id
	// and a colon, is read by the handler.
	routes = append(routes, route{"POST /v1/projects/{p}/locations/{l}/templates/{rest}", modelArmor})
}

// modelArmor emulates Google Cloud's Model Armor
// (docs.cloud.google.com/model-armor/sanitize-prompts-responses):
// sanitizeUserPrompt and sanitizeModelResponse with a template whose
// sensitive data filter finds what is Flagged. Any bearer token
// authenticates.
func modelArmor(w http.ResponseWriter, r *http.Request) {
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || token == "" {
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED",
			"Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	_, verb, _ := strings.Cut(r.PathValue("rest"), ":")
	member := map[string]string{"sanitizeUserPrompt": "userPromptData", "sanitizeModelResponse": "modelResponseData"}[verb]
	if member == "" {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	var req map[string]*struct {
		Text *string `json:"text"`
	}
	if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req) != nil || req[member] == nil || req[member].Text == nil {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid request: "+member+".text is required.")
		return
	}
	emitJSON(w, http.StatusOK, map[string]any{"sanitizationResult": sanitizationResult(*req[member].Text)})
}

// sanitizationResult is Model Armor's result for text: its filters' and
// the overall match state.
func sanitizationResult(text string) map[string]any {
	state := "NO_MATCH_FOUND"
	if Flagged.MatchString(text) {
		state = "MATCH_FOUND"
	}
	filter := func(s string) map[string]any {
		return map[string]any{"executionState": "EXECUTION_SUCCESS", "matchState": s}
	}
	return map[string]any{
		"filterMatchState": state,
		"filterResults": map[string]any{
			"csam":             map[string]any{"csamFilterFilterResult": filter("NO_MATCH_FOUND")},
			"malicious_uris":   map[string]any{"maliciousUriFilterResult": filter("NO_MATCH_FOUND")},
			"pi_and_jailbreak": map[string]any{"piAndJailbreakFilterResult": filter("NO_MATCH_FOUND")},
			"sdp":              map[string]any{"sdpFilterResult": map[string]any{"inspectResult": filter(state)}},
		},
		"invocationResult":     "SUCCESS",
		"sanitizationMetadata": map[string]any{},
	}
}

// googleError answers as Google's APIs fail.
func googleError(w http.ResponseWriter, code int, status, msg string) {
	emitJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
