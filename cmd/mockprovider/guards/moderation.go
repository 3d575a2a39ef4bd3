package guards

import (
	"encoding/json"
	"net/http"
	"strings"
)

func init() { routes = append(routes, route{"POST /v1/moderations", moderation}) }

// moderationCategories are omni-moderation's categories.
var moderationCategories = []string{"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
	"illicit/violent", "self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence",
	"violence/graphic"}

// openAIError is OpenAI's error shape.
func openAIError(message, param string) map[string]any {
	var p any
	if param != "" {
		p = param
	}
	return map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error", "param": p, "code": nil}}
}

// moderationResult is one input's result.
type moderationResult struct {
	Flagged        bool               `json:"flagged"`
	Categories     map[string]bool    `json:"categories"`
	CategoryScores map[string]float64 `json:"category_scores"`
}

// moderation answers as OpenAI's moderation endpoint (POST
// /v1/moderations): a result per input (a string, strings, or one
// result for an array of text and image parts), flagged with
// harassment where the input's text matches Flagged. Any bearer key is
// accepted; none is refused with OpenAI's 401.
func moderation(w http.ResponseWriter, r *http.Request) {
	if bearerKey(r) == "" {
		reply(w, http.StatusUnauthorized, openAIError("You didn't provide an API key. You need to provide your API key in an "+
			"Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", ""))
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	inputs, ok := []string(nil), false
	if err := json.NewDecoder(r.Body).Decode(&req); err == nil {
		inputs, ok = moderationInputs(req.Input)
	}
	if !ok {
		reply(w, http.StatusBadRequest, openAIError("Invalid value for 'input': expected a string, strings or content parts.", "input"))
		return
	}
	if req.Model == "" {
		req.Model = "omni-moderation-latest"
	}
	results := make([]moderationResult, len(inputs))
	for i, in := range inputs {
		results[i] = moderate(in)
	}
	reply(w, http.StatusOK, map[string]any{"id": "modr-emulated", "model": req.Model, "results": results})
}

// moderationInputs are the texts of a request's input, each its own
// result: a string, an array of strings, or an array of content parts
// (one text, their texts joined; image parts have none here).
func moderationInputs(raw json.RawMessage) ([]string, bool) {
	if raw == nil || string(raw) == "null" {
		return nil, false
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
		return nil, false
	}
	var text []string
	for _, p := range parts {
		text = append(text, p.Text)
	}
	return []string{strings.Join(text, "\n")}, true
}

// moderate is one text's result: harassment if it matches Flagged.
func moderate(text string) moderationResult {
	flagged := Flagged.MatchString(text)
	res := moderationResult{Flagged: flagged, Categories: map[string]bool{}, CategoryScores: map[string]float64{}}
	for _, c := range moderationCategories {
		res.Categories[c] = false
		res.CategoryScores[c] = 0.0001
	}
	if flagged {
		res.Categories["harassment"] = true
		res.CategoryScores["harassment"] = 0.91
	}
	return res
}
