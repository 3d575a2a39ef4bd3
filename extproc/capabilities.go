package extproc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"modelgate/envoy/routing"
	"modelgate/translate/api"
	"modelgate/translate/responses"
)

// asks is what a request asks of the model it names: its parsed request,
// whose uses are read only when a model may refuse or drop them (none
// for an endpoint the capabilities do not describe: embeddings, images,
// transcriptions), and its body, whose prompt an auto model's choice
// estimates.
type asks struct {
	chat      *api.ChatRequest
	messages  *api.MessagesRequest
	responses *responses.Request
	history   []json.RawMessage // the stored conversation responses continues
	needs     *api.Needs        // read once asked for (uses)
	body      []byte
	prompt    int64 // estimated once asked for (promptTokens)
}

// ask keeps what the request asks of its model, for pick: in the
// request, which is on the heap already. Set at most one of the parsed
// requests of a.
func (r *request) ask(body []byte, a asks) *asks {
	a.body = body
	r.asks = a
	return &r.asks
}

// described reports a request whose uses the capabilities describe.
func (a *asks) described() bool {
	return a.needs != nil || a.chat != nil || a.messages != nil || a.responses != nil
}

// uses is what the request uses of its model, read once.
func (a *asks) uses() *api.Needs {
	if a.needs == nil {
		var n api.Needs
		switch {
		case a.chat != nil:
			n = a.chat.Needs()
		case a.messages != nil:
			n = a.messages.Needs()
		case a.responses != nil:
			n = a.responses.Needs(a.history)
		}
		a.needs = &n
	}
	return a.needs
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
func (r *router) lacks(m *routing.Model, c api.Capability) bool {
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
			reasons := r.backends[d.Backend].provider.Reasons
			if reasons == nil || reasons(d.Model) {
				return false
			}
		}
		return true
	}
	return false
}

// judges reports whether m's capabilities may refuse or drop what a
// request uses: declared, or known by the provider table.
func (r *router) judges(m *routing.Model) bool {
	c := m.Capabilities
	return len(c.Input) > 0 || c.Tools != nil || c.JSONSchema != nil || c.Reasoning != nil || c.MaxOutput > 0 ||
		r.lacks(m, api.CapReasoning)
}

// serves is what model m leaves out of a request that asks a: the
// capabilities it lacks that its configuration drops; an error names the
// first it lacks that it does not, or an output bound above its own.
func (r *router) serves(m *routing.Model, a *asks) ([]api.Capability, error) {
	if a == nil || !a.described() || !r.judged[m.ID] {
		return nil, nil
	}
	needs := a.uses()
	var drop []api.Capability
	for _, c := range needs.Uses {
		if !r.lacks(m, c) {
			continue
		}
		if !slices.Contains(m.Capabilities.Drop, string(c)) {
			return nil, errLacks(m.ID, c)
		}
		drop = append(drop, c)
	}
	if limit := m.Capabilities.MaxOutput; limit > 0 && needs.MaxOutput > limit {
		return nil, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_value",
			Message: fmt.Sprintf("The model `%s` answers with at most %d tokens; the request asks for %d.", m.ID, limit, needs.MaxOutput)}
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
