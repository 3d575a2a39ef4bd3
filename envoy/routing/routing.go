// Package routing is the gateway's routing, resolved: its backends, its
// public models and their deployments, and the names the ext_proc server
// and Envoy's configuration must agree on. The configuration file
// (extproc/config) resolves into one Table; the ext_proc server
// (extproc.Config) routes by it and Envoy's configuration (envoy.Config)
// is generated from it, so the two cannot disagree on a backend, a
// timeout or a model's fallback.
//
// A Table holds no secrets: the ext_proc server takes the backends'
// credentials beside it (extproc.Credentials), and Envoy never sees them.
package routing

import (
	"net/url"
	"strings"
	"time"
)

// The headers the ext_proc server sets for Envoy's routes. Envoy strips
// each before the request goes upstream.
const (
	// Header is the default routing header (extproc.Config.RoutingHeader,
	// envoy.Config.RoutingHeader): the backend's name, which routes match.
	Header = "x-modelgate-backend"
	// ModelHeader is the public model id, for routes of models with
	// timeouts or fallback of their own.
	ModelHeader = "x-modelgate-model"
	// StreamHeader is "1" on streaming requests, whose routes bound
	// silences rather than the wait for the whole answer.
	StreamHeader = "x-modelgate-stream"
)

// LocalReplyHeader marks a reply Envoy made itself (a timeout, a connect
// failure, a body over the buffer): its value is %RESPONSE_CODE_DETAILS%.
// The ext_proc server, which sees such replies on its response path
// (Envoy 1.37 and later), rewrites them with the model's name and removes
// it.
const LocalReplyHeader = "x-modelgate-envoy-reply"

// DialectKey is the dynamic metadata key, in the server's metadata
// namespace, naming the API a request's client speaks when it is not the
// OpenAI API's: AnthropicDialect for the Messages API's clients. Envoy's
// own replies (local_reply_config) are written in that API's shape by
// it, where Envoy's version does not let the server rewrite them.
const DialectKey = "dialect"

// AnthropicDialect is DialectKey's value for a client of Anthropic's
// Messages API.
const AnthropicDialect = "anthropic"

// MetadataNamespace is the default namespace of the dynamic metadata the
// ext_proc server sets and Envoy logs (the MetadataNamespace of
// extproc.Config and of envoy.Config).
const MetadataNamespace = "io.modelgate"

// Table is the resolved routing.
type Table struct {
	// Backends, in the configuration's order: one Envoy cluster each.
	Backends []Backend
	// Models, in the configuration's order, which /v1/models keeps.
	Models []Model
}

// Backend returns the backend called name.
func (t Table) Backend(name string) (Backend, bool) {
	for _, b := range t.Backends {
		if b.Name == name {
			return b, true
		}
	}
	return Backend{}, false
}

// Backend is an upstream provider endpoint.
type Backend struct {
	// Name is the Envoy cluster and the routing header's value: 1 to 63
	// lower-case letters, digits, '.', '_' or '-', starting with a letter
	// or digit.
	Name string
	// Provider is a name in the provider table (translate/providers).
	Provider string
	// BaseURL is http:// or https:// with a host, an optional port
	// (default 80 or 443) and a path that requests' paths are appended to.
	BaseURL string
	// APIVersion is passed to providers that send one (Azure); empty is
	// the translator's default.
	APIVersion string
	// Region is an AWS region (Bedrock) or a Google Cloud location
	// (Vertex AI).
	Region string
	// Project is the Google Cloud project (Vertex AI).
	Project string
	// Timeouts bound each exchange with the backend.
	Timeouts Timeouts
}

// Host is the base URL's host as Envoy sends it upstream: with its port
// unless that is the scheme's default (Envoy's host rewrite drops it, and
// a request signature over another Host fails).
func (b Backend) Host() string {
	u, err := url.Parse(b.BaseURL)
	if err != nil {
		return ""
	}
	if p := u.Port(); u.Scheme == "https" && p == "443" || u.Scheme == "http" && p == "80" {
		h := u.Hostname()
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return u.Host
}

// BasePath is the path of the base URL without a trailing slash.
func (b Backend) BasePath() string {
	u, err := url.Parse(b.BaseURL)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.EscapedPath(), "/")
}

// Timeouts bound one exchange with a provider; zero means none.
type Timeouts struct {
	// ResponseHeaders is the longest wait, once the request is sent, for
	// the answer to start (the route's per_try_timeout). A buffered
	// answer starts only when it is complete.
	ResponseHeaders time.Duration
	// StreamIdle bounds streaming requests only: the longest silence of
	// the answer, before its first byte and between two chunks (the
	// route's per_try_idle_timeout).
	StreamIdle time.Duration
}

// Or returns t with its zero members taken from def.
func (t Timeouts) Or(def Timeouts) Timeouts {
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
	ID      string
	OwnedBy string
	Created int64
	// Aliases are other names clients may send for the model: exact
	// names, and prefixes ending in * (the longest matching one wins;
	// the model's own id and exact aliases win over any prefix).
	Aliases []string
	// Listed are the exact aliases GET /v1/models lists beside the id.
	Listed []string
	// Deployments serve the model, each on a backend of the Table; an
	// Auto model has none.
	Deployments []Deployment
	// Capabilities are what the model can do.
	Capabilities Capabilities
	// Auto, when set, serves each request by one of other models.
	Auto *Auto
	// ContextWindow is the model's context in tokens; Responses requests
	// with truncation "auto" drop their oldest items to fit it. Zero
	// disables that.
	ContextWindow int
	// ReasoningEfforts are the reasoning efforts the model takes; GET
	// /v1/models lists them.
	ReasoningEfforts []string
	// WebSearch lets the model search the web with its provider's own
	// search when a client asks for it.
	WebSearch bool
	// AutoCache has the gateway place prompt caching breakpoints on
	// requests whose client placed none.
	AutoCache bool
	// Timeouts override its backends' member by member.
	Timeouts Timeouts
	// Fallback, when set, has Envoy pick the deployment of each attempt
	// and retry on another (priorities, weights, outlier ejection); the
	// model gets a cluster and route of its own, and the ext_proc server
	// translates each attempt for the deployment Envoy chose. A backend
	// serves such a model at most once. Without it the ext_proc server
	// picks a deployment by weight and Envoy routes by Header.
	Fallback *Fallback
}

// Capabilities are what a model can do; a nil or empty member is not
// declared (the provider decides).
type Capabilities struct {
	// Input are the kinds of input the model reads (text, image, audio,
	// file).
	Input                        []string
	Tools, JSONSchema, Reasoning *bool
	// MaxOutput bounds the answer's tokens.
	MaxOutput int64
	// Drop are what a request asking for it is served without when the
	// model lacks it (reasoning, tools, json_schema), rather than refused.
	Drop []string
}

// Auto serves each request by one of Candidates (model ids): of those
// that can serve it, the cheapest or the fastest (Prefer).
type Auto struct {
	Candidates []string
	Prefer     string
}

// Deployment is one backend serving a model under its upstream name.
type Deployment struct {
	// Backend names a Table.Backends entry.
	Backend string
	// Model is the name the provider knows the model by.
	Model string
	// Weight is the relative share of requests, within a priority for a
	// model with Fallback; zero counts as one.
	Weight int
	// Priority orders a Fallback model's deployments: 0 first; a higher
	// one takes traffic when the lower ones fail or are ejected. A model
	// without Fallback ignores it.
	Priority int
}

// Fallback is when Envoy tries a model's next deployment and when it sets
// a failing one aside. Zero members take Envoy generator's defaults
// (envoy.Config).
type Fallback struct {
	// Retries after the first attempt; zero means one per deployment
	// beyond the first.
	Retries int
	// RetryOn are the failures that retry; empty means all of them. A
	// per-try timeout before the answer starts retries under Retry5xx or
	// RetryReset.
	RetryOn []RetryCondition
	// MaxRetryAfter is the longest Retry-After of a 429 that Envoy waits
	// for before the retry; zero means 10s. A longer one is ignored, not
	// capped (retry_state_impl.cc: a reset header's interval counts only
	// if it is at most max_interval), and so is a missing one: Envoy's
	// back-off (25ms doubling to 250ms, jittered) applies.
	MaxRetryAfter time.Duration
	// BudgetPercent caps retries in flight at this share of the model's
	// requests in flight (at least 3); zero means 100.
	BudgetPercent float64
	// Outlier ejects a failing deployment for a while.
	Outlier Outlier
}

// RetryCondition is a failure that retries.
type RetryCondition string

// The retry conditions, named as Envoy's retry_on tokens where one exists.
const (
	RetryConnect RetryCondition = "connect-failure"
	RetryReset   RetryCondition = "reset"
	Retry5xx     RetryCondition = "5xx"
	Retry429     RetryCondition = "429"
)

// Outlier ejects a deployment after Consecutive failures in a row, for
// BaseEjection times the number of its ejections (at most 300s).
type Outlier struct {
	// Consecutive is how many 5xx, 429-free gateway failures or local
	// errors in a row eject; zero means 3.
	Consecutive int
	// Interval is how often ejected deployments are reconsidered; zero
	// means 5s.
	Interval time.Duration
	// BaseEjection is the first ejection's length; zero means 30s.
	BaseEjection time.Duration
}
