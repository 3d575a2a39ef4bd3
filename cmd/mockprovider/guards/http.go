package guards

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"
)

func init() { routes = append(routes, route{"POST /http/check", generic}) }

// reply writes v as the JSON answer, with status.
func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

// bearerKey is r's bearer token; empty without one.
func bearerKey(r *http.Request) string {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(key)
}

// match is one Flagged match: its kind, by what matched ("ZEBRA" or
// "FORBIDDEN"), and its Unicode code point offsets, as Python's string
// indices are.
type match struct {
	kind       string
	start, end int
}

// matches are text's Flagged matches.
func matches(text string) []match {
	var out []match
	for _, m := range Flagged.FindAllStringIndex(text, -1) {
		kind := "FORBIDDEN"
		if strings.HasPrefix(strings.ToLower(text[m[0]:m[1]]), "zebra") {
			kind = "ZEBRA"
		}
		start, end := codePoints(text, m)
		out = append(out, match{kind, start, end})
	}
	return out
}

// codePoints converts m, byte offsets into text, to Unicode code point
// offsets.
func codePoints(text string, m []int) (start, end int) {
	start = utf8.RuneCountInString(text[:m[0]])
	return start, start + utf8.RuneCountInString(text[m[0]:m[1]])
}

// genericRequest is the generic HTTP contract's request.
type genericRequest struct {
	Text    *string `json:"text"`
	Context struct {
		Stage string `json:"stage"`
	} `json:"context"`
}

// genericFinding is one finding of the generic contract's answer.
type genericFinding struct {
	Type  string  `json:"type"`
	Start int     `json:"start"`
	End   int     `json:"end"`
	Score float64 `json:"score"`
}

// generic answers as a service of the small generic HTTP contract
// (Agent Router's proposal; docs/guardrails.md): block, with a finding
// per Flagged match, else allow. The key is optional, as the contract
// has it, but a malformed Authorization header is refused.
func generic(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" && bearerKey(r) == "" {
		reply(w, http.StatusUnauthorized, map[string]string{"error": "malformed bearer token"})
		return
	}
	var req genericRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Text == nil {
		reply(w, http.StatusBadRequest, map[string]string{"error": "the body is not {text, context: {stage}}"})
		return
	}
	if s := req.Context.Stage; s != "request" && s != "response" {
		reply(w, http.StatusBadRequest, map[string]string{"error": "context.stage is not request or response"})
		return
	}
	findings := []genericFinding{}
	for _, m := range matches(*req.Text) {
		findings = append(findings, genericFinding{Type: m.kind, Start: m.start, End: m.end, Score: 0.9})
	}
	action := "allow"
	if len(findings) > 0 {
		action = "block"
	}
	reply(w, http.StatusOK, map[string]any{"action": action, "findings": findings})
}
