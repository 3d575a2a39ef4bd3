package guards

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
)

func init() { routes = append(routes, route{"POST /analyze", presidio}) }

// email is what the emulated analyzer finds as an EMAIL_ADDRESS, as
// Presidio's EmailRecognizer would (simplified).
var email = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)

// presidioRequest is the analyzer's request.
type presidioRequest struct {
	Text           string   `json:"text"`
	Language       string   `json:"language"`
	Entities       []string `json:"entities"`
	ScoreThreshold float64  `json:"score_threshold"`
}

// presidioEntity is one entity the analyzer found; offsets are Python
// string indices (code points). AnalysisExplanation is null, as when the
// decision process is not asked for.
type presidioEntity struct {
	EntityType          string            `json:"entity_type"`
	Start               int               `json:"start"`
	End                 int               `json:"end"`
	Score               float64           `json:"score"`
	AnalysisExplanation any               `json:"analysis_explanation"`
	RecognitionMetadata map[string]string `json:"recognition_metadata"`
}

// presidio answers as Presidio's analyzer (POST /analyze): an entity per
// Flagged match (ZEBRA or FORBIDDEN, score 0.85) and per email address
// (EMAIL_ADDRESS, 1.0), by start, of the entities asked for and at the
// score threshold or above. Like the analyzer, it has no authentication
// and fails with 500 and {"error"} on a text or language missing.
func presidio(w http.ResponseWriter, r *http.Request) {
	var req presidioRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		reply(w, http.StatusBadRequest, map[string]string{"error": "Failed to parse /analyze request"})
		return
	}
	if req.Text == "" {
		reply(w, http.StatusInternalServerError, map[string]string{"error": "No text provided"})
		return
	}
	if req.Language == "" {
		reply(w, http.StatusInternalServerError, map[string]string{"error": "No language provided"})
		return
	}
	found := []presidioEntity{}
	for _, e := range presidioEntities(req.Text) {
		if (len(req.Entities) == 0 || slices.Contains(req.Entities, e.EntityType)) && e.Score >= req.ScoreThreshold {
			found = append(found, e)
		}
	}
	reply(w, http.StatusOK, found)
}

// presidioEntities are all the entities in text, by start.
func presidioEntities(text string) []presidioEntity {
	var out []presidioEntity
	for _, m := range matches(text) {
		out = append(out, presidioEntity{EntityType: m.kind, Start: m.start, End: m.end, Score: 0.85,
			RecognitionMetadata: map[string]string{"recognizer_name": "PatternRecognizer"}})
	}
	for _, m := range email.FindAllStringIndex(text, -1) {
		start, end := codePoints(text, m)
		out = append(out, presidioEntity{EntityType: "EMAIL_ADDRESS", Start: start, End: end, Score: 1,
			RecognitionMetadata: map[string]string{"recognizer_name": "EmailRecognizer"}})
	}
	slices.SortStableFunc(out, func(a, b presidioEntity) int { return a.Start - b.Start })
	return out
}
