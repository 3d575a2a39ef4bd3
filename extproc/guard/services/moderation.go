package services

import (
	"context"

	"modelgate/extproc/guard"
)

func init() { types["openai_moderation"] = newModeration }

// moderation is OpenAI's moderation endpoint
// (platform.openai.com/docs/api-reference/moderations/create): POST
// {URL}/v1/moderations with a bearer key and {"model", "input"},
// answered with {"id", "model", "results": [{"flagged", "categories",
// "category_scores"}]}. Any result flagged flags the text; the answer
// says no spans.
type moderation struct {
	caller
	model string
}

// newModeration is the moderation endpoint s specifies; its model is
// omni-moderation-latest unless s says. The key is required.
func newModeration(s Spec) (guard.Service, error) {
	c, err := newCaller(s, "/v1/moderations", bearer(s.APIKey))
	if err == nil {
		err = c.requireKey()
	}
	if err != nil {
		return nil, err
	}
	m := &moderation{caller: c, model: s.Model}
	if m.model == "" {
		m.model = "omni-moderation-latest"
	}
	return m, nil
}

// moderationRequest is the moderation endpoint's request, for one text.
type moderationRequest struct {
	Model string `json:"model"`
	Input string `json:"input"`
}

// moderationAnswer is the part of the answer read; pointers tell a
// member missing or null from a zero one.
type moderationAnswer struct {
	Results []*struct {
		Flagged *bool `json:"flagged"`
	} `json:"results"`
}

// Check asks the endpoint whether in's text breaks OpenAI's policies.
func (m *moderation) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	answer, err := m.post(ctx, moderationRequest{Model: m.model, Input: in.Text})
	if err != nil {
		return guard.Verdict{}, err
	}
	return m.verdict(answer)
}

// verdict reads the answer: flagged if any result is; no result, or one
// without its flag, is an error.
func (m *moderation) verdict(answer []byte) (guard.Verdict, error) {
	var a moderationAnswer
	if err := m.decode(answer, &a); err != nil {
		return guard.Verdict{}, err
	}
	if len(a.Results) == 0 {
		return guard.Verdict{}, m.errorf("answer has no results")
	}
	var v guard.Verdict
	for i, r := range a.Results {
		if r == nil || r.Flagged == nil {
			return guard.Verdict{}, m.errorf("result %d has no flagged", i)
		}
		v.Flagged = v.Flagged || *r.Flagged
	}
	return v, nil
}
