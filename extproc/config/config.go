// Package config loads and validates modelgate's YAML configuration.
//
// The keys are a public interface: documentation and tools rely on them.
// Problems are reported all at once, each with its location as a path such
// as models[0].deployments[1].backend: unknown keys (with the known key a
// misspelling is closest to), values of the wrong type, and values that
// are not valid.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"sigs.k8s.io/yaml"

	"modelgate/translate/api"
	"modelgate/translate/providers"
)

// Config is the whole configuration file.
type Config struct {
	Server  Server  `json:"server"`
	Envoy   Envoy   `json:"envoy"`
	Storage Storage `json:"storage"`
	Limits  Limits  `json:"limits"`
	Images  Images  `json:"images"`
	// Admin is the admin API and dashboard on the admin listener.
	Admin Admin `json:"admin"`
	// RateLimits are the request and token limits; see RateLimits.
	RateLimits RateLimits `json:"rate_limits"`
	Backends   []Backend  `json:"backends"`
	Models     []Model    `json:"models"`
	// Fallback holds the defaults of every model's fallback settings.
	Fallback Fallback `json:"fallback"`
	// Prices are what models cost; see Prices.
	Prices Prices `json:"prices"`
	// Observability is the request log, metrics and tracing.
	Observability Observability `json:"observability"`
	// Guardrails are the operator's rules on the traffic; see Guardrails.
	Guardrails Guardrails `json:"guardrails"`
}

// Server holds the listen addresses of `modelgate serve` and how it stops.
type Server struct {
	// GRPCListen is the ext_proc gRPC address; default 127.0.0.1:50051.
	// It also serves the gRPC health service (grpc.health.v1).
	GRPCListen string `json:"grpc_listen"`
	// AdminListen serves /metrics, /healthz (liveness) and /readyz
	// (readiness); default 127.0.0.1:8081.
	AdminListen string `json:"admin_listen"`
	// ShutdownGrace is how long, after SIGTERM or SIGINT, the ext_proc
	// streams open then may run on (new ones are refused) before they are
	// cut; default 10m, longer than a typical generation. A platform's
	// termination grace period (Kubernetes' terminationGracePeriodSeconds)
	// must be longer still.
	ShutdownGrace Duration `json:"shutdown_grace"`
}

// Admin configures the admin API (/admin/v1/) and web dashboard (/admin/)
// on the admin listener; they are off while the token's variable is unset.
type Admin struct {
	// TokenEnv names the environment variable holding the admin token, at
	// least 32 characters; default MODELGATE_ADMIN_TOKEN. Only its SHA-256
	// is kept.
	TokenEnv string `json:"token_env"`
	// SecureCookies marks the dashboard's session cookie Secure although
	// the admin listener speaks plain HTTP, for a dashboard reached through
	// a TLS-terminating proxy.
	SecureCookies bool `json:"secure_cookies"`
}

// Envoy holds what the generated Envoy bootstrap needs.
type Envoy struct {
	// Listen is Envoy's client-facing address; default 0.0.0.0:8080.
	Listen string `json:"listen"`
	// ExtProcAddress is where Envoy reaches `modelgate serve`; default
	// 127.0.0.1:50051.
	ExtProcAddress string `json:"ext_proc_address"`
	// MessageTimeout is Envoy's per-message ext_proc timeout; default 10s.
	MessageTimeout Duration `json:"message_timeout"`
	// BufferLimitBytes is Envoy's per-connection buffer limit; default
	// the larger of 32 MiB and the largest request body plus 1 MiB. Set it
	// to what a platform's Envoy really has (Envoy Gateway's default is
	// 32 KiB): larger requests then get Envoy's 413, and larger answers are
	// gathered by the gateway instead of buffered.
	BufferLimitBytes int64 `json:"buffer_limit_bytes"`
	// RequestTimeout bounds receiving a client's whole request (Envoy's
	// request_timeout): a client still sending its body then gets a 408;
	// default 120s.
	RequestTimeout Duration `json:"request_timeout"`
	// AdminListen is Envoy's admin interface, IP:port: /ready for health
	// checks, /stats. It can also stop Envoy, so keep it on loopback;
	// default 127.0.0.1:9901.
	AdminListen string `json:"admin_listen"`
	// MaxRequestsInFlight is the circuit-breaker threshold of every Envoy
	// cluster: the most requests in flight (and pending requests and
	// connections) to the ext_proc server and to each backend. Envoy's own
	// default, 1024, would cap the whole gateway, as each request holds
	// a stream to the ext_proc server; default 100000.
	MaxRequestsInFlight int64 `json:"max_requests_in_flight"`
	// AccessLog is where Envoy writes a JSON line per request, with the
	// token usage: stdout (the default), stderr or none.
	AccessLog string `json:"access_log"`
	// UseRemoteAddress is for an Envoy at the edge: it takes the client's
	// address from the connection, appends it to x-forwarded-for and
	// replaces the client's x-request-id and x-envoy-* headers. Off (the
	// default), the client address in the access log comes from
	// x-forwarded-for, which a client can forge.
	UseRemoteAddress bool `json:"use_remote_address"`
	// XffNumTrustedHops is how many proxies in front of Envoy append to
	// x-forwarded-for: the client address is the entry before theirs.
	XffNumTrustedHops int64 `json:"xff_num_trusted_hops"`
}

// Timeouts bound an exchange with a provider. A model's timeouts override
// its backends' member by member.
type Timeouts struct {
	// ResponseHeaders is the longest wait, once the request is sent, for
	// the provider's answer to start; default 300s. A non-streaming
	// answer starts only when it is complete.
	ResponseHeaders Duration `json:"response_headers"`
	// StreamIdle is the longest silence of a streaming answer, before its
	// first byte and between two chunks; default 60s. Reasoning models
	// that think silently need more.
	StreamIdle Duration `json:"stream_idle"`
}

// Storage selects where accounts, keys and usage live.
type Storage struct {
	// SQLitePath is the SQLite database file; default modelgate.db.
	SQLitePath string `json:"sqlite_path"`
	// PostgresURLEnv names the environment variable holding a postgres://
	// URL (it may carry a password, so it is not in the file). When set,
	// the store is that PostgreSQL database instead of SQLitePath: the
	// one several `modelgate serve` replicas share.
	PostgresURLEnv string `json:"postgres_url_env"`
	// ResponseRetention is how long POST /v1/responses results are kept
	// for previous_response_id; default 720h (30 days, as OpenAI keeps
	// them).
	ResponseRetention Duration `json:"response_retention"`
	// UsageRetentionDays is how many days of usage records the gateway
	// keeps: older ones are deleted, every hour; 0 (the default) keeps
	// them all.
	UsageRetentionDays int `json:"usage_retention_days"`
}

// Limits bounds what clients may send.
type Limits struct {
	// MaxRequestBodyBytes is the largest request body; default 10 MiB.
	MaxRequestBodyBytes int64 `json:"max_request_body_bytes"`
	// MaxAudioBytes is the largest transcription upload; default 25 MiB,
	// OpenAI's limit.
	MaxAudioBytes int64 `json:"max_audio_bytes"`
}

// RateLimits configures rate limiting. Accounts and groups can carry
// their own limits in the store; these are the defaults.
type RateLimits struct {
	// Store is "memory" (per replica; the default) or "redis" (shared by
	// every replica).
	Store string `json:"store"`
	// RedisURLEnv names the environment variable holding the redis:// URL
	// when Store is redis.
	RedisURLEnv string `json:"redis_url_env"`
	// FailClosed refuses requests with a 503 while Redis fails; by
	// default they are admitted (fail open), logged and counted.
	FailClosed bool `json:"fail_closed"`
	// Key applies to every API key.
	Key RateLimit `json:"key"`
	// Account applies to every account without limits of its own or of
	// its group.
	Account RateLimit `json:"account"`
}

// RateLimit is one set of limits; zero or absent means unlimited.
type RateLimit struct {
	RequestsPerMinute  int64 `json:"requests_per_minute"`
	TokensPerMinute    int64 `json:"tokens_per_minute"`
	TokensPerDay       int64 `json:"tokens_per_day"`
	ConcurrentRequests int64 `json:"concurrent_requests"`
}

// Images configures the URLs of generated images the gateway keeps (when
// a provider returns bytes and the client asked for response_format url).
type Images struct {
	// URLKeyEnv names the environment variable holding the key that signs
	// image URLs (at least 32 characters). Replicas sharing a database
	// must share it; unset means a random key per process.
	URLKeyEnv string `json:"url_key_env"`
	// URLTTL is how long an image URL works; default 1h.
	URLTTL Duration `json:"url_ttl"`
	// PublicBaseURL is the scheme and host clients reach the gateway at
	// (such as https://llm.example.com); unset takes them from each
	// request's Host.
	PublicBaseURL string `json:"public_base_url"`
}

// Backend is one upstream provider endpoint.
type Backend struct {
	// Name is unique; it becomes the Envoy cluster and routing-header value.
	Name string `json:"name"`
	// Provider is one of Providers.
	Provider string `json:"provider"`
	// BaseURL is the URL that /v1/... paths are appended to.
	BaseURL string `json:"base_url"`
	// APIKeyEnv names the environment variable holding the credential;
	// empty sends no credential (local servers).
	APIKeyEnv string `json:"api_key_env"`
	// APIVersion is the provider API version where one is sent (Azure's
	// api-version); empty uses the translator's default.
	APIVersion string `json:"api_version"`
	// Region is the AWS region of a bedrock backend; empty takes it from
	// the base URL's host (bedrock-runtime.<region>.amazonaws.com).
	Region string `json:"region"`
	// AWSAccessKeyIDEnv, AWSSecretAccessKeyEnv and AWSSessionTokenEnv name
	// the variables holding the AWS credentials a bedrock backend without
	// api_key_env signs requests with; empty means AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
	AWSAccessKeyIDEnv     string `json:"aws_access_key_id_env"`
	AWSSecretAccessKeyEnv string `json:"aws_secret_access_key_env"`
	AWSSessionTokenEnv    string `json:"aws_session_token_env"`
	// Project is the Google Cloud project of a vertex backend; Region is
	// its location (default global).
	Project string `json:"project"`
	// ServiceAccountFile or ServiceAccountEnv (a variable holding the key
	// JSON) give a vertex backend the service account its access tokens
	// are minted for; TokenURL overrides the key file's token_uri. With
	// neither, tokens come from Application Default Credentials
	// (GOOGLE_APPLICATION_CREDENTIALS, gcloud, Workload Identity).
	ServiceAccountFile string `json:"service_account_file"`
	ServiceAccountEnv  string `json:"service_account_env"`
	TokenURL           string `json:"token_url"`
	// Timeouts bound every exchange with this backend.
	Timeouts Timeouts `json:"timeouts"`
}

// Model is a public model id clients send as "model".
type Model struct {
	ID          string       `json:"id"`
	OwnedBy     string       `json:"owned_by"`
	Created     int64        `json:"created"`
	Deployments []Deployment `json:"deployments"`
	// Aliases are other names clients may send for the model, such as
	// an agent's vendor ids: exact names, and prefixes ending in *
	// ("claude-sonnet-4-5*"). A model's id wins over an exact alias,
	// which wins over the longest prefix. GET /v1/models lists an exact
	// alias written {name: …, listed: true}, and no other.
	Aliases []Alias `json:"aliases"`
	// Capabilities are what the model can do, for the catalog and for
	// refusing (or serving without) what a request asks beyond them.
	Capabilities Capabilities `json:"capabilities"`
	// Auto, when set, makes the model a choice among others per request
	// (it has no deployments of its own).
	Auto *Auto `json:"auto"`
	// ContextWindow is the model's context in tokens, for Responses
	// requests with truncation "auto"; zero leaves conversations whole.
	ContextWindow int `json:"context_window"`
	// ReasoningEfforts are the reasoning efforts the model takes, listed
	// by GET /v1/models for clients that offer a choice.
	ReasoningEfforts []string `json:"reasoning_efforts"`
	// WebSearch lets the model search the web with its provider's own
	// search (Anthropic's web search tool, Google Search grounding) when a
	// client asks for it: chat's web_search_options, the Responses API's
	// web_search tool. Off, such a request is served without search and
	// says so in x-modelgate-warning. The provider bills searches apart,
	// and the gateway does not price them yet.
	WebSearch bool `json:"web_search"`
	// AutoCache places prompt caching breakpoints (tools, system prompt,
	// conversation so far) on requests whose client placed none, where the
	// provider caches at markers only: Anthropic, Claude on Vertex AI,
	// Claude and Nova on Bedrock. Off by default: cache writes cost more
	// than input (1.25x), so a prompt that is not sent again costs more.
	AutoCache bool `json:"auto_cache"`
	// Timeouts override its backends' timeouts for this model.
	Timeouts Timeouts `json:"timeouts"`
	// Fallback, when present, serves the model by Envoy's retries across
	// its deployments in priority order, rather than by the gateway's
	// weighted pick of one; members it leaves unset take the top-level
	// fallback's, then the built-in defaults.
	Fallback *Fallback `json:"fallback"`
}

// Alias is another name of a model: written as a plain string, or as
// {name: …, listed: true} to have GET /v1/models list it.
type Alias struct {
	Name   string `json:"name"`
	Listed bool   `json:"listed"`
}

// Capabilities are what a model can do. An unset member is not declared:
// the gateway passes such a request on and the provider decides, unless
// the provider table knows better (Bedrock's models but Claude do not
// reason).
type Capabilities struct {
	// Input are the kinds of input the model reads: text, image, audio,
	// file. Unset declares none.
	Input []string `json:"input"`
	// Tools, JSONSchema and Reasoning: the model calls tools, answers in
	// a JSON schema, reasons before it answers.
	Tools      *bool `json:"tools"`
	JSONSchema *bool `json:"json_schema"`
	Reasoning  *bool `json:"reasoning"`
	// MaxOutput is the most tokens the model answers with; a request
	// that asks for more is refused. Zero declares none.
	MaxOutput int64 `json:"max_output"`
	// Drop names what a request asking for it is served without, rather
	// than refused, when the model lacks it: reasoning, tools,
	// json_schema. Named in the answer's x-modelgate-warning. For agents
	// that ask for reasoning on every request (Claude Code, Codex).
	Drop []string `json:"drop"`
}

// Auto routes each request to one of Candidates: those that can serve
// what it uses, then the cheapest by the configured prices or the
// fastest by measured time to first token.
type Auto struct {
	Candidates []string `json:"candidates"`
	// Prefer is cheapest (the default) or fastest.
	Prefer string `json:"prefer"`
}

// Inputs, Droppable and Prefers are the values of capabilities.input
// (text and the input kinds a request may use), capabilities.drop (what
// a request can be served without) and auto.prefer.
var (
	Inputs, Droppable = capabilities()
	Prefers           = []string{"cheapest", "fastest"}
)

func capabilities() (inputs, droppable []string) {
	inputs = []string{"text"}
	for _, c := range api.Capabilities() {
		if c.Droppable() {
			droppable = append(droppable, string(c))
		} else {
			inputs = append(inputs, string(c))
		}
	}
	return inputs, droppable
}

// Fallback says when Envoy tries a model's next deployment and when it
// sets a failing one aside.
type Fallback struct {
	// Retries after the first attempt; zero means one per deployment
	// beyond the first.
	Retries int `json:"retries"`
	// RetryOn are the failures that retry: connect-failure, reset, 5xx,
	// 429; empty means all. A deployment that does not start answering
	// within its response_headers timeout fails as 5xx.
	RetryOn []RetryCondition `json:"retry_on"`
	// MaxRetryAfter is the longest Retry-After of a 429 that Envoy waits
	// for before the retry; a longer one is ignored, not capped, and the
	// retry comes after Envoy's back-off (25-250ms). Zero means 10s.
	MaxRetryAfter Duration `json:"max_retry_after"`
	// RetryBudgetPercent caps retries in flight at this share of the
	// model's requests in flight; zero means 100.
	RetryBudgetPercent float64 `json:"retry_budget_percent"`
	// Outlier sets a failing deployment aside.
	Outlier Outlier `json:"outlier"`
}

// Outlier ejects a deployment after Consecutive failures in a row, for
// BaseEjection times the number of its ejections.
type Outlier struct {
	Consecutive  int      `json:"consecutive"`
	Interval     Duration `json:"interval"`
	BaseEjection Duration `json:"base_ejection"`
}

// RetryCondition is a failure that retries, one of RetryConditions; 429
// may be written as a number.
type RetryCondition string

// RetryConditions are the values of retry_on.
var RetryConditions = []RetryCondition{"connect-failure", "reset", "5xx", "429"}

// Or returns f with its unset members taken from def.
func (f Fallback) Or(def Fallback) Fallback {
	if f.Retries == 0 {
		f.Retries = def.Retries
	}
	if len(f.RetryOn) == 0 {
		f.RetryOn = def.RetryOn
	}
	if f.MaxRetryAfter.Duration == 0 {
		f.MaxRetryAfter = def.MaxRetryAfter
	}
	if f.RetryBudgetPercent == 0 {
		f.RetryBudgetPercent = def.RetryBudgetPercent
	}
	if f.Outlier.Consecutive == 0 {
		f.Outlier.Consecutive = def.Outlier.Consecutive
	}
	if f.Outlier.Interval.Duration == 0 {
		f.Outlier.Interval = def.Outlier.Interval
	}
	if f.Outlier.BaseEjection.Duration == 0 {
		f.Outlier.BaseEjection = def.Outlier.BaseEjection
	}
	return f
}

func (f Fallback) validate(p *problems, at string) {
	if f.Retries < 0 || f.Retries > 10 {
		p.add(at+".retries", "must be 0 to 10")
	}
	for i, c := range f.RetryOn {
		if !slices.Contains(RetryConditions, c) {
			p.add(fmt.Sprintf("%s.retry_on[%d]", at, i), "%q is not one of connect-failure, reset, 5xx, 429", c)
		}
	}
	if f.MaxRetryAfter.Duration < 0 {
		p.add(at+".max_retry_after", "must not be negative")
	}
	if f.RetryBudgetPercent < 0 || f.RetryBudgetPercent > 100 {
		p.add(at+".retry_budget_percent", "must be 0 to 100")
	}
	if f.Outlier.Consecutive < 0 || f.Outlier.Consecutive > 100 {
		p.add(at+".outlier.consecutive", "must be 0 to 100")
	}
	if f.Outlier.Interval.Duration < 0 {
		p.add(at+".outlier.interval", "must not be negative")
	}
	if f.Outlier.BaseEjection.Duration < 0 {
		p.add(at+".outlier.base_ejection", "must not be negative")
	}
}

// Deployment serves a model on a backend under the upstream model name.
type Deployment struct {
	Backend string `json:"backend"`
	Model   string `json:"model"`
	Weight  int    `json:"weight"`
	// Priority orders the deployments of a model with fallback: 0 first,
	// the next when those are down or set aside.
	Priority int `json:"priority"`
}

// Duration is a time.Duration written as "10s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" { // a key without a value: unset
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`want a duration string such as "10s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// ShutdownOverhead bounds what serve does after server.shutdown_grace has
// run out: waiting for cut streams' bookkeeping, flushing the usage
// ledger, closing the admin listener. A deployment's stop timeout
// (Docker's stop_grace_period, Kubernetes' terminationGracePeriodSeconds
// after preStop) must exceed shutdown_grace by at least this much.
const ShutdownOverhead = 25 * time.Second

// Providers lists the provider kinds this build supports: the names of
// the one provider table.
var Providers = providers.Names()

// Load reads, parses and validates a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse parses and validates YAML. The error lists every problem found.
func Parse(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	var p problems
	// check drops the values it reports, so that decoding the rest
	// succeeds and validation finds every other problem too.
	if js, err = json.Marshal(check(&p, "", raw, typeOf[Config]())); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	cfg := &Config{}
	if err := json.Unmarshal(js, cfg); err != nil { // not expected after check
		p.add(typeErrorPath(err), "%s", typeErrorText(err))
		return nil, p.err()
	}
	cfg.applyDefaults()
	cfg.validate(&p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Defaults of the file's keys that the ext_proc server has a zero-value
// fallback for too: cmd/modelgate passes it the values resolved here, and
// its tests check that the server's fallbacks are the same numbers.
const (
	// DefaultMaxRequestBodyBytes is limits.max_request_body_bytes'.
	DefaultMaxRequestBodyBytes = 10 << 20
	// DefaultMaxAudioBytes is limits.max_audio_bytes', OpenAI's limit.
	DefaultMaxAudioBytes = 25 << 20
	// DefaultImageURLTTL is images.url_ttl's.
	DefaultImageURLTTL = time.Hour
	// DefaultResponseRetention is storage.response_retention's, as long as
	// OpenAI keeps responses.
	DefaultResponseRetention = 30 * 24 * time.Hour
	// DefaultCurrency is prices.currency's.
	DefaultCurrency = "USD"
)

func (c *Config) applyDefaults() {
	setDefault(&c.Server.GRPCListen, "127.0.0.1:50051")
	setDefault(&c.Server.AdminListen, "127.0.0.1:8081")
	setDefault(&c.Prices.Currency, DefaultCurrency)
	setDefault(&c.Observability.Tracing.ServiceName, "modelgate")
	if c.Observability.Capture.RetentionDays == 0 {
		c.Observability.Capture.RetentionDays = 7
	}
	if c.Server.ShutdownGrace.Duration == 0 {
		c.Server.ShutdownGrace.Duration = 10 * time.Minute
	}
	setDefault(&c.Admin.TokenEnv, "MODELGATE_ADMIN_TOKEN")
	setDefault(&c.Envoy.Listen, "0.0.0.0:8080")
	setDefault(&c.Envoy.ExtProcAddress, "127.0.0.1:50051")
	setDefault(&c.Envoy.AdminListen, "127.0.0.1:9901")
	setDefault(&c.Envoy.AccessLog, "stdout")
	if c.Envoy.MaxRequestsInFlight == 0 {
		c.Envoy.MaxRequestsInFlight = 100000
	}
	setDefault(&c.Storage.SQLitePath, "modelgate.db")
	if c.Envoy.MessageTimeout.Duration == 0 {
		c.Envoy.MessageTimeout.Duration = 10 * time.Second
	}
	if c.Envoy.RequestTimeout.Duration == 0 {
		c.Envoy.RequestTimeout.Duration = 120 * time.Second
	}
	for i := range c.Backends {
		t := &c.Backends[i].Timeouts
		if t.ResponseHeaders.Duration == 0 {
			t.ResponseHeaders.Duration = 300 * time.Second
		}
		if t.StreamIdle.Duration == 0 {
			t.StreamIdle.Duration = 60 * time.Second
		}
	}
	if c.Limits.MaxRequestBodyBytes == 0 {
		c.Limits.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if c.Limits.MaxAudioBytes == 0 {
		c.Limits.MaxAudioBytes = DefaultMaxAudioBytes
	}
	if c.Images.URLTTL.Duration == 0 {
		c.Images.URLTTL.Duration = DefaultImageURLTTL
	}
	if c.Storage.ResponseRetention.Duration == 0 {
		c.Storage.ResponseRetention.Duration = DefaultResponseRetention
	}
}

func setDefault(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

// backendName is what Envoy accepts as a cluster name and what is safe as a
// header value.
var backendName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// envName is what a shell accepts as an environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c *Config) validate(p *problems) {
	c.validateObservability(p)
	c.Guardrails.validate(p, c.Models, c.Envoy.MessageTimeout.Duration)
	if d := c.Storage.UsageRetentionDays; d < 0 || d > 100*366 {
		p.add("storage.usage_retention_days", "must be 0 (keep all) or a number of days")
	}
	if g := c.Server.ShutdownGrace.Duration; g < time.Second || g > 24*time.Hour {
		p.add("server.shutdown_grace", "must be between 1s and 24h")
	}
	if c.Limits.MaxRequestBodyBytes < 0 {
		p.add("limits.max_request_body_bytes", "must be positive")
	}
	if c.Envoy.MessageTimeout.Duration < 0 || c.Envoy.MessageTimeout.Duration > time.Hour {
		p.add("envoy.message_timeout", "must be between 0 and 1h")
	}
	if b := c.Envoy.BufferLimitBytes; b < 0 || b > 1<<31 {
		p.add("envoy.buffer_limit_bytes", "must be between 0 (the default) and 2 GiB")
	}
	if c.Envoy.RequestTimeout.Duration < 0 {
		p.add("envoy.request_timeout", "must not be negative")
	}
	c.Envoy.validate(p)
	c.validatePrices(p)
	switch c.RateLimits.Store {
	case "", "memory":
	case "redis":
		if c.RateLimits.RedisURLEnv == "" {
			p.add("rate_limits.redis_url_env", "is required when store is redis")
		}
	default:
		p.add("rate_limits.store", "%q is not memory or redis", c.RateLimits.Store)
	}
	for _, l := range []struct {
		name string
		RateLimit
	}{{"key", c.RateLimits.Key}, {"account", c.RateLimits.Account}} {
		if l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || l.TokensPerDay < 0 || l.ConcurrentRequests < 0 {
			p.add("rate_limits."+l.name, "limits must not be negative")
		}
	}
	if c.Limits.MaxAudioBytes < 0 {
		p.add("limits.max_audio_bytes", "must be positive")
	}
	if d := c.Images.URLTTL.Duration; d < time.Minute || d > 7*24*time.Hour {
		p.add("images.url_ttl", "must be between 1m and 168h")
	}
	if u := c.Images.PublicBaseURL; u != "" {
		if pu, err := url.Parse(u); err != nil || pu.Scheme != "http" && pu.Scheme != "https" || pu.Host == "" || strings.Trim(pu.Path, "/") != "" {
			p.add("images.public_base_url", "must be http(s)://host[:port] without a path")
		}
	}
	if e := c.Storage.PostgresURLEnv; e != "" && !envName.MatchString(e) {
		// Not quoted: a URL put here by mistake may hold a password.
		p.add("storage.postgres_url_env", "is not an environment variable name: name the variable that holds the URL")
	}
	if r := c.Storage.ResponseRetention.Duration; r < time.Minute || r > 366*24*time.Hour {
		p.add("storage.response_retention", "must be between 1m and 8784h (a year)")
	}
	names := map[string]bool{}
	providers := map[string]string{}
	for i, b := range c.Backends {
		at := fmt.Sprintf("backends[%d]", i)
		b.validate(p, at)
		if names[b.Name] {
			p.add(at+".name", "duplicate backend %q", b.Name)
		}
		names[b.Name], providers[b.Name] = true, b.Provider
	}
	ids := map[string]bool{}
	aliases := map[string]string{} // an alias, as written, to its model
	c.Fallback.validate(p, "fallback")
	for i, m := range c.Models {
		at := fmt.Sprintf("models[%d]", i)
		m.validate(p, at, names)
		m.validateAliases(p, at, aliases)
		m.validateAuto(p, at, c.Models)
		for j, d := range m.Deployments {
			if provider := providers[d.Backend]; m.WebSearch && names[d.Backend] && !contains(webSearchProviders(), provider) {
				p.add(fmt.Sprintf("%s.deployments[%d].backend", at, j), "web_search needs a provider with its own web search (%s), not %s", strings.Join(webSearchProviders(), ", "), provider)
			}
		}
		if ids[m.ID] {
			p.add(at+".id", "duplicate model %q", m.ID)
		}
		ids[m.ID] = true
	}
}

func (c Capabilities) validate(p *problems, at string) {
	for j, in := range c.Input {
		if !contains(Inputs, in) {
			p.add(fmt.Sprintf("%s.input[%d]", at, j), "%q is not one of %s", in, strings.Join(Inputs, ", "))
		}
	}
	if len(c.Input) > 0 && !contains(c.Input, "text") {
		p.add(at+".input", "must include text")
	}
	if c.MaxOutput < 0 {
		p.add(at+".max_output", "must not be negative")
	}
	for j, d := range c.Drop {
		if !contains(Droppable, d) {
			p.add(fmt.Sprintf("%s.drop[%d]", at, j), "%q is not one of %s: a request's input is never dropped", d, strings.Join(Droppable, ", "))
		}
	}
}

// validateAuto checks an auto model's candidates: models of the file,
// none of them auto itself.
func (m Model) validateAuto(p *problems, at string, models []Model) {
	if m.Auto == nil {
		return
	}
	if len(m.Auto.Candidates) == 0 {
		p.add(at+".auto.candidates", "needs at least one model")
	}
	if m.Auto.Prefer != "" && !contains(Prefers, m.Auto.Prefer) {
		p.add(at+".auto.prefer", "%q is not one of %s", m.Auto.Prefer, strings.Join(Prefers, ", "))
	}
	for j, c := range m.Auto.Candidates {
		where := fmt.Sprintf("%s.auto.candidates[%d]", at, j)
		i := slices.IndexFunc(models, func(o Model) bool { return o.ID == c })
		switch {
		case i < 0:
			p.add(where, "unknown model %q", c)
		case models[i].Auto != nil:
			p.add(where, "%q is an auto model itself", c)
		case slices.Contains(m.Auto.Candidates[:j], c):
			p.add(where, "%q is listed twice", c)
		}
	}
}

// validate checks the envoy keys that envoy.Bootstrap would otherwise
// refuse without a location.
func (e Envoy) validate(p *problems) {
	if host, port, err := net.SplitHostPort(e.AdminListen); err != nil || net.ParseIP(host) == nil || !isPort(port) {
		p.add("envoy.admin_listen", "%q must be an IP address and a port, such as 127.0.0.1:9901", e.AdminListen)
	}
	if n := e.MaxRequestsInFlight; n < 1 || n > math.MaxUint32 {
		p.add("envoy.max_requests_in_flight", "must be between 1 and %d", uint32(math.MaxUint32))
	}
	switch e.AccessLog {
	case "stdout", "stderr", "none":
	default:
		p.add("envoy.access_log", "%q is not stdout, stderr or none", e.AccessLog)
	}
	if n := e.XffNumTrustedHops; n < 0 || n > math.MaxUint32 {
		p.add("envoy.xff_num_trusted_hops", "must be between 0 and %d", uint32(math.MaxUint32))
	}
}

// isPort reports whether s is a port number, 0 (any free port) included.
func isPort(s string) bool {
	_, err := strconv.ParseUint(s, 10, 16)
	return err == nil
}

func (b Backend) validate(p *problems, at string) {
	if !backendName.MatchString(b.Name) {
		p.add(at+".name", "%q must be 1-63 lower-case letters, digits, '.', '_' or '-'", b.Name)
	}
	if b.Name == "modelgate_extproc" {
		p.add(at+".name", "%q is reserved for the ext_proc cluster", b.Name)
	}
	if !contains(Providers, b.Provider) {
		p.add(at+".provider", "%q is not one of %s", b.Provider, strings.Join(Providers, ", "))
	}
	u, err := url.Parse(b.BaseURL)
	switch {
	case b.BaseURL == "":
		p.add(at+".base_url", "is required")
	case err != nil:
		p.add(at+".base_url", "%v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		p.add(at+".base_url", "scheme must be http or https, not %q", u.Scheme)
	case u.Host == "":
		p.add(at+".base_url", "has no host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		p.add(at+".base_url", "must not have a query, fragment or user info")
	case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/v1"):
		p.add(at+".base_url", "must not end in /v1: the gateway appends /v1/... itself")
	}
	b.Timeouts.validate(p, at+".timeouts")
	if pr, _ := providers.Lookup(b.Provider); pr.Credential == providers.GoogleCloud {
		if b.Project == "" {
			p.add(at+".project", "is required for provider %s", b.Provider)
		}
		if b.ServiceAccountFile != "" && b.ServiceAccountEnv != "" {
			p.add(at, "provider %s takes one of service_account_file and service_account_env (neither uses Application Default Credentials)", b.Provider)
		}
	}
}

// validateAliases checks the model's aliases against those of the models
// before it (claimed, alias to model id): two models cannot claim one
// exact name or one prefix, and a * stands only at the end.
func (m Model) validateAliases(p *problems, at string, claimed map[string]string) {
	for j, alias := range m.Aliases {
		where := fmt.Sprintf("%s.aliases[%d]", at, j)
		a := alias.Name
		prefix, pattern := strings.CutSuffix(a, "*")
		switch {
		case pattern && alias.Listed:
			p.add(where, "%q: a prefix names no model to list; list exact names only", a)
		case prefix == "" || strings.ContainsFunc(a, unicode.IsControl):
			p.add(where, "must be a name, or a prefix before a final *, without control characters")
		case strings.Contains(prefix, "*"):
			p.add(where, "%q: a * stands only at the end, after a prefix", a)
		case claimed[a] != "" && claimed[a] != m.ID:
			p.add(where, "%q is claimed by model %q too: the gateway could not tell which one a client means", a, claimed[a])
		case !pattern && a == m.ID:
			p.add(where, "%q is the model's own id", a)
		}
		if claimed[a] == "" {
			claimed[a] = m.ID
		}
	}
}

func (m Model) validate(p *problems, at string, backends map[string]bool) {
	if m.ID == "" {
		p.add(at+".id", "is required")
	}
	if strings.ContainsFunc(m.ID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		p.add(at+".id", "must not contain control characters")
	}
	m.Timeouts.validate(p, at+".timeouts")
	if m.ContextWindow < 0 {
		p.add(at+".context_window", "must not be negative")
	}
	for j, e := range m.ReasoningEfforts {
		if !contains(reasoningEfforts, e) {
			p.add(fmt.Sprintf("%s.reasoning_efforts[%d]", at, j), "%q is not one of %s", e, strings.Join(reasoningEfforts, ", "))
		}
	}
	m.Capabilities.validate(p, at+".capabilities")
	switch {
	case m.Auto != nil && len(m.Deployments) > 0:
		p.add(at+".deployments", "an auto model has none: it routes to its candidates'")
	case m.Auto != nil && m.Fallback != nil:
		p.add(at+".fallback", "an auto model has none: its candidates may")
	case m.Auto == nil && len(m.Deployments) == 0:
		p.add(at+".deployments", "needs at least one deployment")
	}
	for j, d := range m.Deployments {
		dat := fmt.Sprintf("%s.deployments[%d]", at, j)
		if !backends[d.Backend] {
			p.add(dat+".backend", "unknown backend %q", d.Backend)
		}
		if d.Model == "" {
			p.add(dat+".model", "is required")
		}
		if d.Weight < 0 {
			p.add(dat+".weight", "must not be negative")
		}
		if d.Priority < 0 || d.Priority > 10 {
			p.add(dat+".priority", "must be 0 to 10")
		}
		if d.Priority != 0 && m.Fallback == nil {
			p.add(dat+".priority", "applies to a model with fallback; add fallback: {} to the model")
		}
		for _, other := range m.Deployments[:j] {
			if m.Fallback != nil && other.Backend == d.Backend {
				p.add(dat+".backend", "backend %q serves the model twice; a model with fallback has one deployment per backend", d.Backend)
			}
		}
	}
	if m.Fallback != nil {
		m.Fallback.validate(p, at+".fallback")
	}
}

// webSearchProviders are the providers whose own web search a model with
// web_search uses, as the provider table says (providers.Provider.WebSearch).
func webSearchProviders() []string {
	var out []string
	for _, p := range providers.All() {
		if p.WebSearch {
			out = append(out, p.Name)
		}
	}
	return out
}

// reasoningEfforts are the reasoning efforts of the OpenAI API, in order.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

func (t Timeouts) validate(p *problems, at string) {
	if t.ResponseHeaders.Duration < 0 {
		p.add(at+".response_headers", "must not be negative")
	}
	if t.StreamIdle.Duration < 0 {
		p.add(at+".stream_idle", "must not be negative")
	}
}

// Or returns t with its zero members taken from def.
func (t Timeouts) Or(def Timeouts) Timeouts {
	if t.ResponseHeaders.Duration == 0 {
		t.ResponseHeaders = def.ResponseHeaders
	}
	if t.StreamIdle.Duration == 0 {
		t.StreamIdle = def.StreamIdle
	}
	return t
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// EnvoyBufferLimit is Envoy's per-connection buffer limit for a config. It
// is larger than the request body limit so that the gateway, not Envoy,
// answers oversized requests (with an OpenAI-shaped 413), and large enough
// for buffered responses such as base64 images.
func (cfg *Config) EnvoyBufferLimit() int64 {
	if cfg.Envoy.BufferLimitBytes > 0 {
		return cfg.Envoy.BufferLimitBytes
	}
	return max(max(cfg.Limits.MaxRequestBodyBytes, cfg.Limits.MaxAudioBytes)+1<<20, 32<<20)
}
