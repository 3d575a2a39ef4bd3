package extproc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/extproc/guard"
	"modelgate/translate"
	"modelgate/translate/jsonscan"
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
	// Budget bounds the checks of one phase (a request's, a window of an
	// answer): the services asked at once, each within its own timeout
	// too. Zero: each service's timeout alone.
	Budget time.Duration
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
// within the request phase's budget, and notes what each did; the first
// that blocks refuses the request (the refusal names the rule, never
// what matched), a service that fails closed makes it a 503, and what
// mask rules matched is masked in the request before it is translated.
func (s *Server) guardRequest(ctx context.Context, r *request, body []byte) error {
	if r.texts == nil {
		return nil
	}
	rules := guard.For(s.requestRules, r.model, addedRules(r.principal))
	if len(rules) == 0 {
		return nil
	}
	if jsonscan.AmbiguousKeys(body) { // the rules could read a text a provider does not
		return errAmbiguousMembers()
	}
	if b := s.cfg.Guardrails.Budget; b > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b)
		defer cancel()
	}
	texts := r.texts()
	checked := guard.Check(ctx, rules, texts, s.guardCache, guard.NewMasker(s.cfg.Guardrails.MaskKey, accountOf(r.principal)))
	r.guards = append(r.guards, checked.Outcomes...)
	switch {
	case checked.Blocked != nil:
		return errContentFilter(checked.Blocked.Name)
	case checked.Failed != nil:
		return errGuardUnavailable(checked.Failed.Name, checked.Err)
	case checked.Masked != nil && r.maskTexts != nil:
		r.changedBody = r.maskTexts(checked.Masked)
	}
	return nil
}

func accountOf(p *authz.Principal) string {
	if p == nil {
		return ""
	}
	return p.AccountID
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
	return guard.NewAnswer(guard.AnswerConfig{Rules: rules, Window: s.cfg.Guardrails.Window, Dialect: r.answerDialect, Stream: stream,
		Masker: guard.NewMasker(s.cfg.Guardrails.MaskKey, accountOf(r.principal)), Usage: usage, IncludeUsage: r.includeUsage,
		Budget: s.cfg.Guardrails.Budget, Now: s.now})
}

// errContentFilter is the refusal of a request a guardrail blocked:
// OpenAI's content_filter (as Azure OpenAI answers a prompt its filters
// block), which the Messages API's clients get as an
// invalid_request_error. Retrying the same request cannot pass.
func errContentFilter(rule string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "content_filter", noRetry: true,
		Message: fmt.Sprintf("The request was blocked by the gateway's guardrail %q.", quoted(rule))}
}

// errAnswerFiltered is the error of an answer a guardrail blocked whose
// API has no refusal of its own (a transcription's): content_filter, as
// a request's.
func errAnswerFiltered(rule string) *APIError {
	e := errContentFilter(rule)
	e.Message = fmt.Sprintf("The answer was blocked by the gateway's guardrail %q.", quoted(rule))
	return e
}

// addedRules are the optional rules the principal's key, account and
// group add by name.
func addedRules(p *authz.Principal) []string {
	if p == nil {
		return nil
	}
	return p.Guardrails
}

// errGuardUnavailable is the refusal of an exchange whose guardrail's
// service failed with failure closed: the text could not be checked, so
// it does not pass. A retry may find the service back.
func errGuardUnavailable(rule string, cause error) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: codeGuardUnavailable, Cause: cause,
		Message: fmt.Sprintf("The gateway's guardrail %q could not check the text: its guard service did not answer.", quoted(rule))}
}

// The verdict cache's size and how long a verdict is kept: an agent's
// history is sent again every turn of a session.
const (
	guardCacheSize = 100_000
	guardCacheTTL  = time.Hour
)

// codeGuardUnavailable is the code of a refusal for a guard service that
// failed, which no deployment is to blame for.
const codeGuardUnavailable = "guardrail_unavailable"

// guardSkippedHeader names, on an answer, the request rules whose
// service failed with failure open: the request went on unchecked by
// them.
const guardSkippedHeader = "x-modelgate-guardrail-skipped"

// skippedRules are the rules of outcomes that failed open, comma
// separated; empty when none did.
func skippedRules(outcomes []guard.Outcome) string {
	var names []string
	for _, o := range outcomes {
		if o.Result == guard.ErrorOpen {
			names = append(names, o.Rule)
		}
	}
	return strings.Join(names, ",")
}

// inOrder is the function a Map function of the request's API calls for
// each text, in the order its reader found them: the masked texts, one a
// call.
func inOrder(masked []string) func(translate.RequestText) string {
	i := 0
	return func(t translate.RequestText) string {
		if i >= len(masked) {
			return t.Text
		}
		i++
		return masked[i-1]
	}
}

// mustJSON is v, members of a request, as JSON.
func mustJSON(v map[string]json.RawMessage) []byte {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: members read from JSON
		panic(err)
	}
	return b
}

// bodyOr is body, the request as masked, when the parser kept it, else
// its members as JSON.
func bodyOr(body []byte, members map[string]json.RawMessage) []byte {
	if body != nil {
		return body
	}
	return mustJSON(members)
}

// errAmbiguousMembers refuses a request whose JSON names a member twice
// in any case: the gateway's rules read the last of them in any case, a
// provider may read another, so what a rule checked might not be what the
// provider gets.
func errAmbiguousMembers() *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "invalid_json", noRetry: true,
		Message: "The request names a member twice in one object (in any case): the gateway's guardrails cannot tell which one a provider reads."}
}

// guardsCost is what the guard services' calls of outcomes cost.
func guardsCost(outcomes []guard.Outcome) pricing.Nanos {
	var c pricing.Nanos
	for _, o := range outcomes {
		c += o.Cost
	}
	return c
}
