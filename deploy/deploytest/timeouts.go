package deploytest

// The timeouts on a model's path. Whatever a platform calls them, the
// timers a request for a model meets on its way to the provider must let
// the model's own timeouts (timeouts.response_headers and stream_idle of
// the modelgate config, a model's overriding its backend's) run out first:
// a shorter one cuts the answer with Envoy's 504 (or 408) whatever the
// model allows. ModelPaths lists the requests the config makes possible,
// each platform's test gathers the Timers on the route that request takes,
// and CheckPath compares them.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/envoy/routing"
	"modelgate/extproc/config"
)

// IdleMargin is how much an idle timer that is not the model's own bound
// must outlast the model's timeouts, as the generated bootstrap's
// connection manager does (stream_idle_timeout = max(300s, every
// response_headers + 10s, every stream_idle + 10s)): with equal values the
// two timers race, and the connection manager's 504 "stream timeout" may
// win over the route's clearer reply.
const IdleMargin = 10 * time.Second

// ModelPath is one kind of request for a model: streamed or not, through
// one of its deployments' backends.
type ModelPath struct {
	Model, Backend string
	Stream         bool
	// Headers are the routing headers the ext_proc server sets for it:
	// the backend under the routing header, the model id under
	// routing.ModelHeader, and routing.StreamHeader "1" when streamed.
	Headers map[string]string
	// ResponseHeaders and StreamIdle are the model's timeouts on that
	// backend (its own, else the backend's).
	ResponseHeaders, StreamIdle time.Duration
}

func (p ModelPath) String() string {
	kind := "non-streamed"
	if p.Stream {
		kind = "streamed"
	}
	return fmt.Sprintf("model %s on backend %s, %s", p.Model, p.Backend, kind)
}

// ModelPaths lists every path of the config's models, in config order.
// Models served by fallback are left out: their routes match other
// headers, which the mesh manifests do not carry (their tests fail on the
// bootstrap's fallback routes first).
func ModelPaths(cfg *config.Config, routingHeader string) []ModelPath {
	var paths []ModelPath
	for _, m := range cfg.Models {
		if m.Fallback != nil {
			continue
		}
		var seen []string
		for _, d := range m.Deployments {
			if slices.Contains(seen, d.Backend) {
				continue
			}
			seen = append(seen, d.Backend)
			t := modelTimeouts(cfg, m, d.Backend)
			for _, stream := range []bool{false, true} {
				h := map[string]string{routingHeader: d.Backend, routing.ModelHeader: m.ID}
				if stream {
					h[routing.StreamHeader] = "1"
				}
				paths = append(paths, ModelPath{Model: m.ID, Backend: d.Backend, Stream: stream, Headers: h,
					ResponseHeaders: t.ResponseHeaders.Duration, StreamIdle: t.StreamIdle.Duration})
			}
		}
	}
	return paths
}

// Matches reports whether a route matching exactly these headers (and
// nothing else) takes the path's requests.
func (p ModelPath) Matches(headers map[string]string) bool {
	for k, v := range headers {
		if p.Headers[k] != v {
			return false
		}
	}
	return true
}

// TimerKind says what a timer bounds, and so what it must outlast.
type TimerKind int

const (
	// Overall bounds the whole exchange (a route's timeout).
	Overall TimerKind = iota
	// PerTry bounds the wait for the answer to start (per_try_timeout):
	// at least response_headers.
	PerTry
	// Idle bounds any silence of the stream, and is not the model's own
	// bound (the connection manager's stream_idle_timeout, a route's
	// idle_timeout standing in for it): it must outlast response_headers
	// (a non-streamed answer is silent until complete) and stream_idle,
	// each by IdleMargin.
	Idle
	// StreamIdle is the route's own bound on gaps in a streamed answer
	// (per_try_idle_timeout, or a route idle_timeout set for streaming
	// routes only): at least stream_idle on a streamed path, and on a
	// non-streamed one above response_headers by IdleMargin, as Idle.
	StreamIdle
)

// Timer is one timeout on a path.
type Timer struct {
	// What names it in the manifests, for messages.
	What string
	Kind TimerKind
	// D is its value; zero means none (disabled).
	D time.Duration
}

// CheckPath reports every timer shorter than the path's timeouts allow,
// and a streamed path that nothing bounds (a stalled provider would hold
// the stream forever). where names the route the path takes.
func CheckPath(p ModelPath, where string, timers []Timer) []error {
	var errs []error
	short := func(t Timer, min time.Duration, why string) {
		errs = append(errs, fmt.Errorf("%s → %s: %s is %v, shorter than %v (%s)", p, where, t.What, t.D, min, why))
	}
	rh := fmt.Sprintf("timeouts.response_headers %v", p.ResponseHeaders)
	si := fmt.Sprintf("timeouts.stream_idle %v", p.StreamIdle)
	bounded := false
	for _, t := range timers {
		if t.D == 0 {
			continue
		}
		switch t.Kind {
		case Overall, PerTry:
			if t.D < p.ResponseHeaders {
				short(t, p.ResponseHeaders, rh)
			}
		case Idle:
			bounded = true
			if p.Stream {
				if min := p.StreamIdle + IdleMargin; t.D < min {
					short(t, min, si+" + "+IdleMargin.String())
				}
			} else if min := p.ResponseHeaders + IdleMargin; t.D < min {
				short(t, min, rh+" + "+IdleMargin.String()+": a non-streamed answer is silent until it is complete")
			}
		case StreamIdle:
			bounded = true
			if p.Stream {
				if t.D < p.StreamIdle {
					short(t, p.StreamIdle, si)
				}
			} else if min := p.ResponseHeaders + IdleMargin; t.D < min {
				short(t, min, rh+" + "+IdleMargin.String()+": a non-streamed answer is silent until it is complete")
			}
		}
	}
	if p.Stream && !bounded {
		errs = append(errs, fmt.Errorf("%s → %s: no idle timeout bounds the stream (want at most %v of silence, %s): a stalled provider would hold it forever",
			p, where, p.StreamIdle, si))
	}
	return errs
}

// LongestPath is the longest silence any model of the config allows,
// fallback models included: an idle timer shared by every route (the
// connection manager's stream idle timeout) must outlast it by
// IdleMargin.
func LongestPath(cfg *config.Config) time.Duration {
	var d time.Duration
	for _, b := range cfg.Backends {
		d = max(d, b.Timeouts.ResponseHeaders.Duration, b.Timeouts.StreamIdle.Duration)
	}
	for _, m := range cfg.Models {
		for _, dep := range m.Deployments {
			t := modelTimeouts(cfg, m, dep.Backend)
			d = max(d, t.ResponseHeaders.Duration, t.StreamIdle.Duration)
		}
	}
	return d
}

// modelTimeouts are a model's timeouts on one backend: its own, else the
// backend's.
func modelTimeouts(cfg *config.Config, m config.Model, backend string) config.Timeouts {
	t := m.Timeouts
	for _, b := range cfg.Backends {
		if b.Name == backend {
			t = t.Or(b.Timeouts)
		}
	}
	return t
}

// WantReported fails t unless errs report every one of want, each as a
// part of the joined message, and fails it on any error when want is
// empty.
func WantReported(t testing.TB, errs []error, want []string) {
	t.Helper()
	got := errors.Join(errs...)
	if len(want) == 0 && got != nil {
		t.Fatal(got)
	}
	for _, w := range want {
		if got == nil || !strings.Contains(got.Error(), w) {
			t.Errorf("want an error with %q, got:\n%v", w, got)
		}
	}
	if got != nil {
		t.Logf("reported:\n%v", got)
	}
}
