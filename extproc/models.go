package extproc

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"modelgate/authz"
	"modelgate/translate"
)

// Backend is an upstream the gateway can route to.
type Backend struct {
	// Name is the Envoy cluster and the value of the routing header.
	Name string
	// Provider selects the translator, such as "openai".
	Provider string
	// BasePath is the path of the backend's base URL, without a trailing
	// slash.
	BasePath string
	// APIKey is the provider credential; empty sends none.
	APIKey string
	// APIVersion is passed to translators that send one (Azure).
	APIVersion string
	// Host is the upstream host, for signatures; Region and AWS are for
	// backends that sign with SigV4.
	Host   string
	Region string
	AWS    translate.AWSCredentials
	// Project is the Google Cloud project (Vertex AI).
	Project string
	// Token, when set, supplies a short-lived bearer credential per
	// request (Vertex AI access tokens); it replaces APIKey. It must be
	// safe for concurrent use and cache what it mints.
	Token func(ctx context.Context) (string, error)
	// Timeouts are the backend's, as Envoy enforces them (its routes are
	// generated from the same config); the server names them in errors
	// and tells a stalled stream from a client that left.
	Timeouts Timeouts
}

// Timeouts bound an exchange with a provider; zero means none.
type Timeouts struct {
	// ResponseHeaders is the longest wait for the answer to start.
	ResponseHeaders time.Duration
	// StreamIdle is the longest silence of a streaming answer.
	StreamIdle time.Duration
}

// or returns t with its zero members taken from def.
func (t Timeouts) or(def Timeouts) Timeouts {
	if t.ResponseHeaders == 0 {
		t.ResponseHeaders = def.ResponseHeaders
	}
	if t.StreamIdle == 0 {
		t.StreamIdle = def.StreamIdle
	}
	return t
}

// Model is a public model id and the deployments that serve it.
type Model struct {
	ID          string
	OwnedBy     string
	Created     int64
	Deployments []Deployment
	// ContextWindow is the model's context in tokens; Responses requests
	// with truncation "auto" drop their oldest items to fit it. Zero
	// disables that.
	ContextWindow int
	// Timeouts override its backends' member by member.
	Timeouts Timeouts
	// Fallback says Envoy picks the deployment of each attempt and
	// retries on another (priorities, weights, outlier ejection, its
	// retry policy): cmd/modelgate sets it for a model whose deployments
	// have priorities or retries configured, and generates the model's
	// cluster and route (envoy.Fallback). The server then does not pick
	// a deployment: the router-level stream authenticates, admits and
	// passes the client's OpenAI body on; an upstream stream per attempt
	// translates it for the backend Envoy chose; the router-level stream
	// translates the answer of the backend that answered, as it names
	// itself in x-modelgate-deployment (fallback.go). A backend may serve
	// a fallback model only once, and every deployment must serve each
	// endpoint the model is used with. Without Fallback the server picks
	// by Weight and Envoy routes by the routing header, as before.
	Fallback bool
}

// Deployment is one backend serving a model under its upstream name.
type Deployment struct {
	Backend string
	Model   string
	// Weight is the relative share of requests; zero counts as one.
	Weight int
	// Priority orders a Fallback model's deployments for Envoy: 0 first;
	// a higher one takes traffic when the lower ones fail or are ejected.
	// The generated cluster carries it; the server's own pick (models
	// without Fallback) ignores it.
	Priority int
}

// router resolves public model ids to deployments. It is immutable after
// newRouter.
type router struct {
	models   map[string]*Model
	order    []*Model // config order, for /v1/models
	backends map[string]Backend
}

// newRouter builds the routing table. A model without a Created time is
// listed with created (the server's start).
func newRouter(backends []Backend, models []Model, created int64) (*router, error) {
	r := &router{models: make(map[string]*Model), backends: make(map[string]Backend)}
	for _, b := range backends {
		if _, dup := r.backends[b.Name]; dup {
			return nil, fmt.Errorf("backend %q defined twice", b.Name)
		}
		r.backends[b.Name] = b
	}
	for i := range models {
		m := &models[i]
		if _, dup := r.models[m.ID]; dup {
			return nil, fmt.Errorf("model %q defined twice", m.ID)
		}
		if len(m.Deployments) == 0 {
			return nil, fmt.Errorf("model %q has no deployments", m.ID)
		}
		seen := map[string]bool{}
		for _, d := range m.Deployments {
			if _, ok := r.backends[d.Backend]; !ok {
				return nil, fmt.Errorf("model %q: unknown backend %q", m.ID, d.Backend)
			}
			if d.Priority < 0 {
				return nil, fmt.Errorf("model %q: backend %q has a negative priority", m.ID, d.Backend)
			}
			// An attempt names its deployment by backend alone (the
			// endpoint metadata of the model's cluster).
			if m.Fallback && seen[d.Backend] {
				return nil, fmt.Errorf("model %q: backend %q serves it twice, which a fallback model cannot tell apart", m.ID, d.Backend)
			}
			seen[d.Backend] = true
		}
		if m.Created == 0 {
			m.Created = created
		}
		r.models[m.ID] = m
		r.order = append(r.order, m)
	}
	return r, nil
}

// lookup finds a model the principal may use.
func (r *router) lookup(p *authz.Principal, model string) (*Model, error) {
	m, ok := r.models[model]
	if !ok {
		return nil, errModelNotFound(model)
	}
	if !p.Allows(model) {
		return nil, errModelNotAllowed(model)
	}
	return m, nil
}

// target is the deployment's target and the timeouts that bound it.
func (r *router) target(m *Model, d Deployment) (translate.Target, Timeouts) {
	b := r.backends[d.Backend]
	return translate.Target{Backend: b.Name, Provider: b.Provider, Model: d.Model,
		BasePath: b.BasePath, APIKey: b.APIKey, APIVersion: b.APIVersion, Host: b.Host, Region: b.Region, AWS: b.AWS,
		Project: b.Project}, m.Timeouts.or(b.Timeouts)
}

// deployment is the model's deployment on a backend, as Envoy names the
// one it chose for an attempt of a Fallback model.
func (m *Model) deployment(backend string) (Deployment, bool) {
	for _, d := range m.Deployments {
		if d.Backend == backend {
			return d, true
		}
	}
	return Deployment{}, false
}

// first is the deployment Envoy tries first: the lowest priority (the
// first listed among equals).
func (m *Model) first() Deployment {
	best := m.Deployments[0]
	for _, d := range m.Deployments[1:] {
		if d.Priority < best.Priority {
			best = d
		}
	}
	return best
}

// pick makes a weighted random choice.
func pick(ds []Deployment) Deployment {
	if len(ds) == 1 {
		return ds[0]
	}
	total := 0
	for _, d := range ds {
		total += weight(d)
	}
	n := rand.IntN(total)
	for _, d := range ds {
		if n -= weight(d); n < 0 {
			return d
		}
	}
	return ds[len(ds)-1]
}

func weight(d Deployment) int { return max(d.Weight, 1) }

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// get renders the Model object of a model the principal may use, the
// entry GET /v1/models lists for it; false if there is none.
func (r *router) get(p *authz.Principal, id string) ([]byte, bool) {
	m, ok := r.models[id]
	if !ok || !p.Allows(id) {
		return nil, false
	}
	b, err := json.Marshal(m.object())
	if err != nil { // cannot happen: plain strings and numbers
		panic(err)
	}
	return b, true
}

func (m *Model) object() modelObject {
	return modelObject{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.OwnedBy}
}

// list renders ListModelsResponse with the models the principal may use.
func (r *router) list(p *authz.Principal) []byte {
	out := modelList{Object: "list", Data: []modelObject{}}
	for _, m := range r.order {
		if p.Allows(m.ID) {
			out.Data = append(out.Data, m.object())
		}
	}
	b, err := json.Marshal(out)
	if err != nil { // cannot happen: plain strings and numbers
		panic(err)
	}
	return b
}
