package extproc

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"modelgate/envoy/routing"
	"modelgate/translate/api"
	"modelgate/translate/providers"
)

// asks is what a request asks of the model it names: what it uses of it
// (described: not for an endpoint whose requests the capabilities do not
// describe, embeddings and images) and its body, whose prompt an auto
// model's choice estimates.
type asks struct {
	needs     api.Needs
	described bool
	body      []byte
	prompt    int64 // estimated once asked for (promptTokens)
}

// ask keeps what the request asks of its model (body, and needs where
// its endpoint's requests are described), for pick: in the request,
// which is on the heap already.
func (r *request) ask(body []byte, needs ...api.Needs) *asks {
	r.asks = asks{body: body}
	if len(needs) > 0 {
		r.asks.needs, r.asks.described = needs[0], true
	}
	return &r.asks
}

// promptTokens is the request's estimated prompt.
func (a *asks) promptTokens() int64 {
	if a.prompt == 0 && len(a.body) > 0 {
		a.prompt = promptEstimate(a.body)
	}
	return a.prompt
}

// lacks reports whether model m lacks capability c: declared so, or, when
// undeclared, known so by the provider table for every deployment of m
// (Bedrock's models but Claude do not reason). What nobody declared the
// model has: the provider decides.
func (r *router) lacks(m *routing.Model, c api.Capability, ps map[string]providers.Provider) bool {
	caps := m.Capabilities
	switch c {
	case api.CapImage, api.CapAudio, api.CapFile:
		return len(caps.Input) > 0 && !slices.Contains(caps.Input, string(c))
	case api.CapTools:
		return caps.Tools != nil && !*caps.Tools
	case api.CapJSONSchema:
		return caps.JSONSchema != nil && !*caps.JSONSchema
	case api.CapReasoning:
		if caps.Reasoning != nil {
			return !*caps.Reasoning
		}
		if len(m.ReasoningEfforts) > 0 || len(m.Deployments) == 0 {
			return false
		}
		for _, d := range m.Deployments {
			reasons := ps[r.backends[d.Backend].Provider].Reasons
			if reasons == nil || reasons(d.Model) {
				return false
			}
		}
		return true
	}
	return false
}

// serves is what model m leaves out of a request that asks a: the
// capabilities it lacks that its configuration drops; an error names the
// first it lacks that it does not, or an output bound above its own.
func (r *router) serves(m *routing.Model, a *asks, ps map[string]providers.Provider) ([]api.Capability, error) {
	if a == nil || !a.described {
		return nil, nil
	}
	var drop []api.Capability
	for _, c := range a.needs.Uses {
		if !r.lacks(m, c, ps) {
			continue
		}
		if !slices.Contains(m.Capabilities.Drop, string(c)) {
			return nil, errLacks(m.ID, c)
		}
		drop = append(drop, c)
	}
	if limit := m.Capabilities.MaxOutput; limit > 0 && a.needs.MaxOutput > limit {
		return nil, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_value",
			Message: fmt.Sprintf("The model `%s` answers with at most %d tokens; the request asks for %d.", m.ID, limit, a.needs.MaxOutput)}
	}
	return drop, nil
}

// errLacks refuses a request that uses what its model lacks, before any
// provider is asked.
func errLacks(model string, c api.Capability) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_parameter",
		Message: fmt.Sprintf("The model `%s` does not support %s, which this request uses.", quoted(model), c.Phrase())}
}

// errNoCandidate refuses a request no candidate of an auto model can
// serve, saying what each lacked.
func errNoCandidate(auto string, why []string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "model", Code: "unsupported_value",
		Message: fmt.Sprintf("No model `%s` routes to can serve this request: %s.", quoted(auto), strings.Join(why, "; "))}
}
