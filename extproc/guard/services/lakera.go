package services

import (
	"context"

	"modelgate/extproc/guard"
)

func init() { types["lakera"] = newLakera }

// lakera is Lakera Guard v2 (docs.lakera.ai/api-reference/api/endpoints/guard/screen-content):
// POST {URL}/v2/guard with a bearer key and {"messages": [{"role",
// "content"}], "project_id"?}, answered with {"flagged", ...}: one
// verdict for the call, by the project's policy (the default policy
// without Spec.ProjectID). The answer says no spans.
type lakera struct {
	caller
	project string
}

// newLakera is the Lakera Guard s specifies. The key is required.
func newLakera(s Spec) (guard.Service, error) {
	c, err := newCaller(s, "/v2/guard", bearer(s.APIKey))
	if err == nil {
		err = c.requireKey()
	}
	if err != nil {
		return nil, err
	}
	return &lakera{caller: c, project: s.ProjectID}, nil
}

// lakeraRequest is Lakera Guard's request: the text as one message in
// the chat shape.
type lakeraRequest struct {
	Messages  []lakeraMessage `json:"messages"`
	ProjectID string          `json:"project_id,omitempty"`
}

// lakeraMessage is one message of the chat shape.
type lakeraMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// lakeraAnswer is the part of the answer read; a pointer tells the
// verdict missing or null from false.
type lakeraAnswer struct {
	Flagged *bool `json:"flagged"`
}

// Check asks Lakera Guard about in's text: the user's at the request
// phase, the assistant's at the response phase.
func (l *lakera) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	role := "user"
	if in.Phase == guard.Response {
		role = "assistant"
	}
	req := lakeraRequest{Messages: []lakeraMessage{{Role: role, Content: in.Text}}, ProjectID: l.project}
	answer, err := l.post(ctx, req)
	if err != nil {
		return guard.Verdict{}, err
	}
	return l.verdict(answer)
}

// verdict reads the answer's flagged.
func (l *lakera) verdict(answer []byte) (guard.Verdict, error) {
	var a lakeraAnswer
	if err := l.decode(answer, &a); err != nil {
		return guard.Verdict{}, err
	}
	if a.Flagged == nil {
		return guard.Verdict{}, l.errorf("answer has no flagged")
	}
	return guard.Verdict{Flagged: *a.Flagged}, nil
}
