package extproc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"modelgate/authz"
	"modelgate/envoy/routing"
	"modelgate/translate"
	"modelgate/translate/providers"
)

// Credentials are a backend's secrets, which the routing table
// (routing.Table, which Envoy's configuration is generated from) does
// not hold.
type Credentials struct {
	// APIKey is the provider credential; empty sends none.
	APIKey string
	// AWS signs the requests of a backend that signs with SigV4.
	AWS translate.AWSCredentials
	// Token, when set, supplies a short-lived bearer credential per
	// request (Vertex AI access tokens); it replaces APIKey. It must be
	// safe for concurrent use and cache what it mints.
	Token func(ctx context.Context) (string, error)
}

// backend is a backend as the server reaches it.
type backend struct {
	routing.Backend
	Credentials
	basePath, host string
	provider       providers.Provider // its kind, from the provider table
}

// router resolves public model ids to deployments. It is immutable after
// newRouter.
type router struct {
	models   map[string]*routing.Model
	order    []*routing.Model // config order, for /v1/models
	backends map[string]backend
	// aliases are the models' exact aliases; prefixes their aliases
	// ending in *, longest first.
	aliases  map[string]*routing.Model
	prefixes []prefixAlias
	// judged are the models whose capabilities may refuse or drop what
	// a request uses (capabilities.go): the others' requests are not
	// read for it. candidates are the models an auto model routes to,
	// whose health it ranks them by.
	judged, candidates map[string]bool
}

// prefixAlias is an alias ending in *: the names that start with prefix.
type prefixAlias struct {
	prefix string
	model  *routing.Model
}

// newRouter builds the routing table. A model without a Created time is
// listed with created (the server's start).
func newRouter(t routing.Table, creds map[string]Credentials, created int64) (*router, error) {
	r := &router{models: make(map[string]*routing.Model), backends: make(map[string]backend)}
	for _, b := range t.Backends {
		if _, dup := r.backends[b.Name]; dup {
			return nil, fmt.Errorf("backend %q defined twice", b.Name)
		}
		p, _ := providers.Lookup(b.Provider) // an unknown one is New's error
		r.backends[b.Name] = backend{Backend: b, Credentials: creds[b.Name], basePath: b.BasePath(), host: b.Host(), provider: p}
	}
	for name := range creds {
		if _, ok := r.backends[name]; !ok {
			return nil, fmt.Errorf("credentials for backend %q, which is not configured", name)
		}
	}
	models := slices.Clone(t.Models)
	for i := range models {
		m := &models[i]
		if _, dup := r.models[m.ID]; dup {
			return nil, fmt.Errorf("model %q defined twice", m.ID)
		}
		if len(m.Deployments) == 0 && m.Auto == nil {
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
			if m.Fallback != nil && seen[d.Backend] {
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
	r.judged, r.candidates = map[string]bool{}, map[string]bool{}
	for _, m := range r.order {
		r.judged[m.ID] = r.judges(m)
		if m.Auto == nil {
			continue
		}
		for _, c := range m.Auto.Candidates {
			if cm := r.models[c]; cm == nil || cm.Auto != nil {
				return nil, fmt.Errorf("auto model %q: candidate %q is not a model with deployments", m.ID, c)
			}
			r.candidates[c] = true
		}
	}
	return r, r.alias()
}

// alias indexes the models' aliases; two models claiming one name or one
// prefix are an error (the config refuses them first).
func (r *router) alias() error {
	r.aliases = map[string]*routing.Model{}
	seen := map[string]*routing.Model{}
	for _, m := range r.order {
		for _, a := range m.Aliases {
			if other := seen[a]; other != nil && other != m {
				return fmt.Errorf("models %q and %q both claim the alias %q", other.ID, m.ID, a)
			}
			seen[a] = m
			if prefix, ok := strings.CutSuffix(a, "*"); ok {
				r.prefixes = append(r.prefixes, prefixAlias{prefix: prefix, model: m})
			} else {
				r.aliases[a] = m
			}
		}
	}
	slices.SortStableFunc(r.prefixes, func(a, b prefixAlias) int { return len(b.prefix) - len(a.prefix) })
	return nil
}

// resolve is the model a client's name means: the model of that id, else
// the one with that exact alias, else the one with the longest prefix
// alias the name starts with; nil for none. as is the configured name
// that matched (the id, the alias, the prefix with its *), a bounded
// label for the name a client sent.
func (r *router) resolve(name string) (m *routing.Model, as string) {
	if m, ok := r.models[name]; ok {
		return m, m.ID
	}
	if m, ok := r.aliases[name]; ok {
		return m, name
	}
	for _, a := range r.prefixes {
		if strings.HasPrefix(name, a.prefix) {
			return a.model, a.prefix + "*"
		}
	}
	return nil, ""
}

// lookup finds a model the principal may use, and the configured name
// the client's matched (resolve).
func (r *router) lookup(p *authz.Principal, model string) (*routing.Model, string, error) {
	m, as := r.resolve(model)
	if m == nil {
		return nil, "", errModelNotFound(model)
	}
	if !p.Allows(m.ID) { // per-key access is to the model an alias names
		return nil, "", errModelNotAllowed(model)
	}
	return m, as, nil
}

// target is the deployment's target and the timeouts that bound it.
func (r *router) target(m *routing.Model, d routing.Deployment) (translate.Target, routing.Timeouts) {
	b := r.backends[d.Backend]
	return translate.Target{Backend: b.Name, Provider: b.Provider, Model: d.Model,
		BasePath: b.basePath, APIKey: b.APIKey, APIVersion: b.APIVersion, Host: b.host, Region: b.Region, AWS: b.AWS,
		Project: b.Project, WebSearch: m.WebSearch, AutoCache: m.AutoCache}, m.Timeouts.Or(b.Timeouts)
}

// deploymentOn is the model's deployment on a backend, as Envoy names the
// one it chose for an attempt of a Fallback model.
func deploymentOn(m *routing.Model, backend string) (routing.Deployment, bool) {
	for _, d := range m.Deployments {
		if d.Backend == backend {
			return d, true
		}
	}
	return routing.Deployment{}, false
}

// firstDeployment is the deployment Envoy tries first: the lowest
// priority (the first listed among equals).
func firstDeployment(m *routing.Model) routing.Deployment {
	best := m.Deployments[0]
	for _, d := range m.Deployments[1:] {
		if d.Priority < best.Priority {
			best = d
		}
	}
	return best
}

// pick makes a weighted random choice.
func pick(ds []routing.Deployment) routing.Deployment {
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

func weight(d routing.Deployment) int { return max(d.Weight, 1) }

// webSearch reports whether the model may search the web with its
// provider's own search: what the model's requests are permitted beyond
// answering (api.LeftOut).
func (r *router) webSearch(model string) bool {
	m := r.models[model]
	return m != nil && m.WebSearch
}

// countsTokens reports whether every deployment of the model (the one a
// request was routed to) is on a provider (of ps) that counts its tokens
// itself (Anthropic; Claude on Bedrock): the gateway estimates the
// others' counts itself, before routing (whichever deployment a Fallback
// model's attempts reach).
func (r *router) countsTokens(model string, ps map[string]providers.Provider) bool {
	m := r.models[model]
	if m == nil || len(m.Deployments) == 0 {
		return false
	}
	for _, d := range m.Deployments {
		if !ps[r.backends[d.Backend].Provider].CountsTokens(d.Model) {
			return false
		}
	}
	return true
}
