// Package services are the guard services a guardrail rule can check
// text with, one per documented wire contract (docs/guardrails.md): each
// a guard.Service that makes one HTTP call per check, with no retries,
// and reads the service's answer defensively (a non-2xx status, a body
// that is not the contract's JSON, or a JSON null where a verdict should
// be is an error, never a pass).
package services

import (
	"fmt"
	"net/http"
	"time"

	"modelgate/extproc/guard"
)

// Spec is one configured service, its credentials read from the
// environment already.
type Spec struct {
	// Name names it in the config's rules; Type is its contract (Types).
	Name, Type string
	// URL is its base URL (scheme, host, and a path prefix if any), where
	// the contract's path is appended; for AWS Bedrock and Google Model
	// Armor, empty means the service's regional endpoint.
	URL string
	// APIKey is the key or token the contract sends (bearer, Lakera's,
	// Azure's Ocp-Apim-Subscription-Key, OpenAI's).
	APIKey string
	// Presidio: the language, entities and score threshold asked for.
	Language       string
	Entities       []string
	ScoreThreshold float64
	// Model: OpenAI moderation's model; the LLM judge's model.
	Model string
	// AWS Bedrock ApplyGuardrail: the guardrail, its version, the region
	// and the credentials (SigV4, service bedrock).
	GuardrailID, GuardrailVersion, Region string
	AWSAccessKeyID, AWSSecretAccessKey    string
	AWSSessionToken                       string
	// Azure AI Content Safety: the lowest severity that flags (0, 2, 4,
	// 6; default 4).
	SeverityThreshold int
	// Google Model Armor: the template
	// (projects/P/locations/L/templates/T) and a service account's JSON
	// key for its OAuth token.
	Template       string
	ServiceAccount string
	// Lakera Guard: the project whose policy applies; empty for the
	// default.
	ProjectID string
	// Client makes the calls; nil means one of its own. Its timeout is
	// not the check's: the context bounds each call.
	Client *http.Client
	// Now is the clock SigV4 signs with; nil means time.Now.
	Now func() time.Time
}

// constructor builds the service of one contract.
type constructor func(Spec) (guard.Service, error)

// types are the contracts, by Spec.Type; each service's file adds its
// own (init).
var types = map[string]constructor{}

// Types are the contract names New knows.
func Types() []string {
	out := make([]string, 0, len(types))
	for t := range types {
		out = append(out, t)
	}
	return out
}

// New is the service s specifies.
func New(s Spec) (guard.Service, error) {
	c, ok := types[s.Type]
	if !ok {
		return nil, fmt.Errorf("guard service %q: unknown type %q", s.Name, s.Type)
	}
	if s.Client == nil {
		s.Client = &http.Client{Transport: transport()}
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return c(s)
}

// transport is a service's own: Go's default but for the idle
// connections it keeps to the service, which are as many as the calls a
// service takes at once (the default's two would make most calls open a
// connection).
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 256
	return t
}
