package services

import (
	"context"

	"modelgate/extproc/guard"
)

func init() { types["presidio"] = newPresidio }

// presidio is a Presidio analyzer (microsoft.github.io/presidio/api-docs/api-docs.html,
// "Analyzer", POST /analyze): POST {URL}/analyze with {"text",
// "language", "entities"?, "score_threshold"?}, answered with a list of
// {"entity_type", "start", "end", "score"}, whose offsets are Python
// string indices (Unicode code points). Any entity found flags the text,
// its span with it. The analyzer has no authentication of its own: a
// bearer key is sent only if Spec.APIKey is set (for a proxy before it).
type presidio struct {
	caller
	request presidioRequest
}

// newPresidio is the Presidio analyzer s specifies; its language is
// "en" unless s says.
func newPresidio(s Spec) (guard.Service, error) {
	c, err := newCaller(s, "/analyze", bearer(s.APIKey))
	if err != nil {
		return nil, err
	}
	p := &presidio{caller: c, request: presidioRequest{Language: s.Language, Entities: s.Entities, ScoreThreshold: s.ScoreThreshold}}
	if p.request.Language == "" {
		p.request.Language = "en"
	}
	return p, nil
}

// presidioRequest is the analyzer's request: what is not set is left to
// the analyzer (all entities, its own threshold).
type presidioRequest struct {
	Text           string   `json:"text"`
	Language       string   `json:"language"`
	Entities       []string `json:"entities,omitempty"`
	ScoreThreshold float64  `json:"score_threshold,omitempty"`
}

// presidioEntity is the part of one entity found that is read; pointers
// tell a member missing or null from a zero one.
type presidioEntity struct {
	Start *int `json:"start"`
	End   *int `json:"end"`
}

// Check asks the analyzer for the entities in in's text.
func (p *presidio) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	req := p.request
	req.Text = in.Text
	answer, err := p.post(ctx, req)
	if err != nil {
		return guard.Verdict{}, err
	}
	return p.verdict(in.Text, answer)
}

// verdict reads the answer about text: flagged if it lists an entity,
// with each one's span.
func (p *presidio) verdict(text string, answer []byte) (guard.Verdict, error) {
	var found *[]*presidioEntity
	if err := p.decode(answer, &found); err != nil {
		return guard.Verdict{}, err
	}
	if found == nil {
		return guard.Verdict{}, p.errorf("answer is null, not a list of entities")
	}
	spans := make([][2]int, len(*found))
	for i, e := range *found {
		if e == nil || e.Start == nil || e.End == nil {
			return guard.Verdict{}, p.errorf("entity %d has no start or end", i)
		}
		spans[i] = [2]int{*e.Start, *e.End}
	}
	spans, err := p.byteSpans(text, spans)
	if err != nil {
		return guard.Verdict{}, err
	}
	return guard.Verdict{Flagged: len(spans) > 0, Spans: spans}, nil
}
