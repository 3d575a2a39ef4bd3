package extproc

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"

	"modelgate/translate"
)

// GuardRule is a guardrail on requests: a request whose text, in the
// parts the rule reads, one of its patterns matches is refused before
// any of it reaches a provider, with 400 content_filter in the client's
// API's shape. A Fallback model's request is checked once, by the
// router-level stream, not per attempt.
type GuardRule struct {
	// Name names the rule in the refusal and the logs.
	Name     string
	Patterns []*regexp.Regexp
	// Parts are the parts of the client's text the rule reads.
	Parts []translate.Part
}

// guarded reports that rules read the client's text: a flow then tells
// the request how to find it (request.texts).
func (s *Server) guarded() bool { return len(s.cfg.Guardrails) > 0 }

// guardRequest runs the rules on the request's text, in order; the
// first that matches refuses it. The refusal names the rule, never what
// matched.
func (s *Server) guardRequest(r *request) error {
	if r.texts == nil {
		return nil
	}
	texts := r.texts()
	for _, rule := range s.cfg.Guardrails {
		for _, t := range texts {
			if !slices.Contains(rule.Parts, t.Part) {
				continue
			}
			for _, p := range rule.Patterns {
				if p.MatchString(t.Text) {
					return errContentFilter(rule.Name)
				}
			}
		}
	}
	return nil
}

// errContentFilter is the refusal of a request a guardrail blocked:
// OpenAI's content_filter (as Azure OpenAI answers a prompt its filters
// block), which the Messages API's clients get as an
// invalid_request_error. Retrying the same request cannot pass.
func errContentFilter(rule string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "content_filter", noRetry: true,
		Message: fmt.Sprintf("The request was blocked by the gateway's guardrail %q.", quoted(rule))}
}
