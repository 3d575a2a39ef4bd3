package extproc

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"modelgate/envoy/routing"
)

// choose is the candidate of auto model m that serves a request asking a
// on endpoint ep: of the candidates that can serve all the request uses
// (and its estimated prompt, within their context window), those with a
// deployment this replica has not set aside as failing (all of them when
// none has), the cheapest by the configured prices or the fastest by the
// time to first token measured here, in the config's order among equals.
func (s *Server) choose(m *routing.Model, ep endpoint, a *asks) (*routing.Model, error) {
	var capable []*routing.Model
	var why []string
	for _, id := range m.Auto.Candidates {
		c := s.router.models[id]
		switch _, err := s.router.serves(c, a); {
		case err != nil:
			why = append(why, err.(*APIError).Message) // serves refuses with APIErrors only
			continue
		case !s.servesEndpoint(c, ep):
			why = append(why, "`"+c.ID+"` does not serve "+ep.String())
			continue
		case c.Fallback != nil && ep.spec().form:
			// A Fallback model's attempts read the model from the body,
			// which the gateway names the candidate in, and a form's it
			// does not edit.
			why = append(why, "`"+c.ID+"` is a fallback model, which auto does not route forms to")
			continue
		}
		if window := int64(c.ContextWindow); window > 0 && a != nil && a.promptTokens() > window {
			why = append(why, "`"+c.ID+"` has a context window of "+strconv.FormatInt(window, 10)+" tokens")
			continue
		}
		capable = append(capable, c)
	}
	if len(capable) == 0 {
		return nil, errNoCandidate(m.ID, why)
	}
	now := s.now()
	up := slices.DeleteFunc(slices.Clone(capable), func(c *routing.Model) bool { return s.health.down(c, now) })
	if len(up) == 0 { // every one failing: one may have recovered
		up = capable
	}
	rank := func(c *routing.Model) float64 { return s.health.ttft(c.ID) }
	if m.Auto.Prefer != "fastest" {
		rank = func(c *routing.Model) float64 { return s.expectedCost(c, a, now) }
	}
	return slices.MinFunc(up, func(x, y *routing.Model) int { return cmp.Compare(rank(x), rank(y)) }), nil
}

// servesEndpoint reports whether every deployment of model c is on a
// provider that serves ep.
func (s *Server) servesEndpoint(c *routing.Model, ep endpoint) bool {
	for _, d := range c.Deployments {
		if !ep.spec().serves(s.providers[s.router.backends[d.Backend].Provider]) {
			return false
		}
	}
	return true
}

// expectedCost is what the request would cost on model c at its prices:
// its estimated prompt and an answer as long as its bound (or a thousand
// tokens); +Inf for a model without a price, which ranks last.
func (s *Server) expectedCost(c *routing.Model, a *asks, at time.Time) float64 {
	p, ok := s.cfg.Prices.At(c.ID, at)
	if !ok {
		return math.Inf(1)
	}
	prompt, answer := int64(1000), int64(1000)
	if a != nil {
		prompt = a.promptTokens()
		if a.described() && a.uses().MaxOutput > 0 {
			answer = a.uses().MaxOutput
		}
	}
	return float64(p.Input)*float64(prompt) + float64(p.Output)*float64(answer)
}

// health is what this replica has seen of each model's deployments: the
// failures in a row that set one aside for a while, as Envoy's outlier
// detection does for a Fallback model's, and the time to first token of
// each model's streams. An auto model routes by it.
type health struct {
	mu   sync.Mutex
	deps map[deploymentKey]*deploymentHealth
	// speed is each model's time to first token in seconds, a moving
	// average.
	speed map[string]float64
}

type deploymentKey struct{ model, backend string }

type deploymentHealth struct {
	failures int       // in a row
	until    time.Time // set aside until then
}

// Defaults of the failures in a row that set a deployment aside and for
// how long, where the model's fallback says nothing (Envoy's defaults).
const (
	defaultConsecutive = 3
	defaultEjection    = 30 * time.Second
	// speedWeight is the share of a new time to first token in the
	// moving average.
	speedWeight = 0.2
)

// observe records how an exchange with model m on backend ended: an
// answer, a failure of the deployment (failed), or neither (a refusal of
// the request), and its time to first token (zero for none). A failure
// without a backend (every attempt of a Fallback model failed) counts
// against all of the model's deployments.
func (h *health) observe(m *routing.Model, backend string, answered, failed bool, ttft time.Duration, now time.Time) {
	if !answered && !failed {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deps == nil {
		h.deps, h.speed = map[deploymentKey]*deploymentHealth{}, map[string]float64{}
	}
	if ttft > 0 {
		if old, ok := h.speed[m.ID]; ok {
			h.speed[m.ID] = old + speedWeight*(ttft.Seconds()-old)
		} else {
			h.speed[m.ID] = ttft.Seconds()
		}
	}
	consecutive, ejection := defaultConsecutive, defaultEjection
	if f := m.Fallback; f != nil {
		consecutive, ejection = cmp.Or(f.Outlier.Consecutive, consecutive), cmp.Or(f.Outlier.BaseEjection, ejection)
	}
	for _, d := range m.Deployments {
		if backend != "" && d.Backend != backend || backend == "" && !failed {
			continue
		}
		k := deploymentKey{m.ID, d.Backend}
		dh := h.deps[k]
		if dh == nil {
			dh = &deploymentHealth{}
			h.deps[k] = dh
		}
		if !failed {
			dh.failures = 0
			continue
		}
		if dh.failures++; dh.failures >= consecutive {
			dh.until = now.Add(ejection)
		}
	}
}

// down reports whether every deployment of m is set aside at now.
func (h *health) down(m *routing.Model, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range m.Deployments {
		if dh := h.deps[deploymentKey{m.ID, d.Backend}]; dh == nil || !now.Before(dh.until) {
			return false
		}
	}
	return true
}

// ttft is model id's measured time to first token in seconds; zero when
// none was measured, so that a model is tried before it is ranked.
func (h *health) ttft(id string) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.speed[id]
}
