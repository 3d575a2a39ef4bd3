package gemini

import (
	"strings"
)

// searchQueries gathers the Google Search queries of an answer's
// grounding (every candidate's, and every event's of a stream) to count
// the searches Google bills apart from tokens. As Google's grounding
// documentation (https://ai.google.dev/gemini-api/docs/google-search,
// Pricing) and Vertex AI's pricing state it, Gemini 3 models are billed
// per search query the model ran, empty queries ignored and each unique
// query once; Gemini 2.5 and older models per grounded prompt, however
// many queries it ran. So the count is the unique non-empty queries, or
// one for an older model's answer that searched; the price per search
// (prices' web_search) is then per query or per grounded prompt by model.
type searchQueries struct {
	seen map[string]struct{}
}

// add gathers the queries of g (nil when the candidate was not grounded).
func (s *searchQueries) add(g *groundingMetadata) {
	if g == nil {
		return
	}
	for _, q := range g.WebSearchQueries {
		if q == "" {
			continue
		}
		if s.seen == nil {
			s.seen = make(map[string]struct{})
		}
		s.seen[q] = struct{}{}
	}
}

// billed is the searches Google bills for the answer of the model
// version that answered (modelVersion, else the model the request
// named): the unique queries from Gemini 3 on (and for a model whose
// generation its name does not tell), one grounded prompt before.
func (s *searchQueries) billed(version, model string) int64 {
	n := int64(len(s.seen))
	if n == 0 {
		return 0
	}
	g, ok := modelGeneration(version)
	if !ok {
		g, ok = modelGeneration(model)
	}
	if ok && g < 3 {
		return 1
	}
	return n
}

// modelGeneration is the major version a Gemini model id names
// ("gemini-2.5-flash" 2, "gemini-3-pro-preview" 3), false when it names
// none ("gemini-flash-latest").
func modelGeneration(model string) (int, bool) {
	_, rest, ok := strings.Cut(model, "gemini-")
	if !ok {
		return 0, false
	}
	n, digits := 0, 0
	for ; digits < len(rest) && digits < 4 && rest[digits] >= '0' && rest[digits] <= '9'; digits++ {
		n = n*10 + int(rest[digits]-'0')
	}
	return n, digits > 0
}
