package extproc

import (
	"fmt"
	"net/http"

	"modelgate/authz"
	"modelgate/extproc/guard"
	"modelgate/translate"
)

// Guardrails are the operator's rules on the traffic (package guard): the
// request rules run once per request, a Fallback model's included, by
// the router-level stream, before anything reaches a provider; the
// response rules on the answer's text as the translator reports it, before
// the client gets it.
type Guardrails struct {
	// Rules are the rules of both phases, in order.
	Rules []*guard.Rule
	// Window is how a streamed answer is checked.
	Window guard.Window
	// MaskKey makes masks (guard.Masker); random per process when empty.
	MaskKey []byte
}

// rules are g's rules of phase p, in order.
func (g *Guardrails) rules(p guard.Phase) []*guard.Rule {
	var out []*guard.Rule
	for _, r := range g.Rules {
		if r.Phase == p {
			out = append(out, r)
		}
	}
	return out
}

// guarded reports that rules read the client's text: a flow then tells
// the request how to find it (request.texts).
func (s *Server) guarded() bool { return len(s.requestRules) > 0 }

// guardRequest runs the request rules on the request's text, in order,
// and notes what each did; the first that blocks refuses the request. The
// refusal names the rule, never what matched.
func (s *Server) guardRequest(r *request) error {
	if r.texts == nil {
		return nil
	}
	outcomes, blocked := guard.Check(guard.For(s.requestRules, r.model, addedRules(r.principal)), r.texts())
	r.guards = append(r.guards, outcomes...)
	if blocked != nil {
		return errContentFilter(blocked.Name)
	}
	return nil
}

// guardAnswer is the guard of an answer the response rules read: a
// successful one of an API whose text they know; nil for any other.
func (s *Server) guardAnswer(r *request, status int, stream bool, usage func() translate.Usage) *guard.Answer {
	if len(s.responseRules) == 0 || r.answerDialect == 0 || status/100 != 2 {
		return nil
	}
	rules := guard.For(s.responseRules, r.model, addedRules(r.principal))
	if len(rules) == 0 {
		return nil
	}
	var account string
	if r.principal != nil {
		account = r.principal.AccountID
	}
	return guard.NewAnswer(guard.AnswerConfig{Rules: rules, Window: s.cfg.Guardrails.Window, Dialect: r.answerDialect,
		Stream: stream, Masker: guard.NewMasker(s.cfg.Guardrails.MaskKey, account), Usage: usage, IncludeUsage: r.includeUsage})
}

// errContentFilter is the refusal of a request a guardrail blocked:
// OpenAI's content_filter (as Azure OpenAI answers a prompt its filters
// block), which the Messages API's clients get as an
// invalid_request_error. Retrying the same request cannot pass.
func errContentFilter(rule string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "content_filter", noRetry: true,
		Message: fmt.Sprintf("The request was blocked by the gateway's guardrail %q.", quoted(rule))}
}

// addedRules are the optional rules the principal's key, account and
// group add by name.
func addedRules(p *authz.Principal) []string {
	if p == nil {
		return nil
	}
	return p.Guardrails
}
