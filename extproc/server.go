package extproc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"runtime"
	"slices"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
	"modelgate/authz/state"
	"modelgate/envoy/routing"
	"modelgate/extproc/guard"
	"modelgate/extproc/redact"
	"modelgate/ratelimit"
	"modelgate/translate/providers"
)

// Authenticator turns a presented API key into a principal. It returns an
// error matching authz.ErrUnauthenticated for unknown, malformed or revoked
// keys and authz.ErrDisabled for disabled keys or accounts.
type Authenticator interface {
	Authenticate(ctx context.Context, key string) (*authz.Principal, error)
}

// UsageRecorder appends one record to the usage ledger. It must be safe for
// concurrent use.
type UsageRecorder interface {
	AppendUsage(ctx context.Context, rec ledger.UsageRecord) error
}

// Config holds the server's routing table and knobs.
type Config struct {
	// Routing is the backends and models the server routes to; Envoy's
	// configuration is generated from the same table.
	Routing routing.Table
	// Credentials are the backends' secrets, by backend name; a backend
	// without an entry sends none.
	Credentials map[string]Credentials
	// MaxRequestBodyBytes limits request bodies; zero means 10 MiB. Envoy's
	// buffer limit must be larger so that the gateway, not Envoy, answers
	// with an OpenAI-shaped 413.
	MaxRequestBodyBytes int64
	// RoutingHeader carries the chosen backend to Envoy's route table; zero
	// means routing.Header. It must not start with "x-envoy-".
	RoutingHeader string
	// MetadataNamespace is the dynamic metadata namespace for usage; zero
	// means routing.MetadataNamespace.
	MetadataNamespace string
	// Logger receives one child logger per stream; nil logs nothing.
	Logger *zap.Logger
	// RequestLogger receives the line each request ends with ("request
	// done"); nil means Logger. A busy gateway writes one a request, so
	// serve buffers them.
	RequestLogger *zap.Logger
	// RequestLogSample is the share of successful requests whose
	// "request done" line is written, in (0, 1]; refusals and errors are
	// always written. Zero means 1.
	RequestLogSample float64
	// Capture keeps exchanges' bodies, redacted; nil keeps none.
	Capture *Capture
	// Guardrails are the operator's rules on requests and answers
	// (guard.go).
	Guardrails Guardrails
	// Tracer starts a span per exchange, a child of the request's W3C
	// traceparent; nil traces nothing.
	Tracer trace.Tracer
	// Metrics records request metrics; nil records none.
	Metrics *Metrics
	// Prices give each usage record its cost; nil (or a model without a
	// price in effect) records it as unknown. A *pricing.Live table may
	// change while the server runs.
	Prices pricing.Source
	// MessageTimeout is Envoy's ext_proc message_timeout
	// (envoy.message_timeout): a request body whose reply takes longer
	// was answered by Envoy itself (504) and never reached a provider.
	// Zero means unknown.
	MessageTimeout time.Duration
	// UsageTimeout bounds the bookkeeping after a reply, on contexts
	// that outlive the client: an exchange's usage records and rate-limit
	// charges together, and storing a response or each image on its own;
	// zero means 5s.
	UsageTimeout time.Duration
	// Responses stores the responses POST /v1/responses produces, for
	// previous_response_id; nil stores none (continuations then fail
	// with 404).
	Responses ResponseStore
	// ResponseRetention is how long stored responses live; zero means 30
	// days.
	ResponseRetention time.Duration
	// MaxAudioBodyBytes is the largest transcription upload; zero means
	// 25 MiB, OpenAI's limit.
	MaxAudioBodyBytes int64
	// Images keeps generated images a provider returned as bytes when the
	// client asked for URLs; nil refuses such requests with a 500.
	Images ImageStore
	// ImageURLKey signs image URLs. Replicas that share Images must share
	// it; empty means a random key, so URLs die with the process.
	ImageURLKey []byte
	// ImageURLTTL is how long an image URL works; zero means one hour, as
	// OpenAI's do.
	ImageURLTTL time.Duration
	// Limiter enforces rate limits; nil enforces none.
	Limiter ratelimit.Limiter
	// KeyLimits apply to every key; AccountLimits to every account that
	// has no limits of its own or of its group (field by field).
	KeyLimits, AccountLimits authz.Limits
	// Spender enforces the budgets of keys, accounts and groups, in the
	// currency of Prices; nil enforces none. LedgerSpender makes one that
	// rebuilds its counters from the ledger when they are lost. The
	// charges it fails to make are kept and made once it answers again
	// (ratelimit.Reconciler; see Server.Run).
	Spender ratelimit.Spender
	// Currency names the unit of Prices and budgets in messages; zero
	// means "USD".
	Currency string
	// RateLimitFailClosed refuses requests with a 503 while the limiter
	// or the Spender fails; by default they are admitted (fail open), logged and counted.
	RateLimitFailClosed bool
	// PublicBaseURL is the scheme and host clients reach the gateway at,
	// for image URLs; empty takes them from each request.
	PublicBaseURL string
	// DefaultOutputTokens is what a chat or Responses request that sets no
	// max tokens reserves for its answer from token limits, beside its
	// estimated prompt; the real usage is charged at the end. Zero means
	// 1024.
	DefaultOutputTokens int64
	// MaxBufferedResponseBytes is the largest embeddings or images answer
	// left to Envoy's buffer; larger ones, or of unknown length, the server
	// gathers from a stream, which no buffer limits. Zero means 8 MiB.
	MaxBufferedResponseBytes int64
	// MaxResponseBytes bounds an answer the server gathers; a larger one
	// fails with 502. Zero means 256 MiB.
	MaxResponseBytes int64
}

// Server is the ext_proc ExternalProcessor. It keeps no per-request state
// between streams.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	cfg    Config
	auth   Authenticator
	usage  UsageRecorder
	router *router
	// providers are the configured backends' providers, by name.
	providers map[string]providers.Provider
	// secrets are the backends' credentials, which no provider error a
	// client gets may quote (scrubCredentials).
	secrets []string
	// requestRules and responseRules are the guardrails of each phase.
	requestRules, responseRules []*guard.Rule
	// guardCache keeps the services' verdicts on requests' texts.
	guardCache *guard.Cache
	// health is what this replica saw of the models' deployments, which
	// auto models route by.
	health health
	log    *zap.Logger
	now    func() time.Time
}

// StreamWorkers is how many pooled goroutines a gRPC server of ext_proc
// streams should start them on (grpc.NumStreamWorkers; more start when
// all are busy): a stream then starts on a goroutine whose stack has
// grown already, instead of growing a new one's. Every stream of a
// busy replica wants one: four per core served only half of 16
// concurrent streams on two cores, so the rest grew fresh stacks.
func StreamWorkers() uint32 { return uint32(max(64, 4*runtime.GOMAXPROCS(0))) }

// Defaults of Config for callers that leave them zero; the configuration
// file's (extproc/config's) are the same, as cmd/modelgate's tests check.
const (
	DefaultMaxRequestBodyBytes = 10 << 20
	DefaultMaxAudioBodyBytes   = 25 << 20
	DefaultImageURLTTL         = time.Hour
	DefaultResponseRetention   = 30 * 24 * time.Hour
	DefaultCurrency            = "USD"
)

func withDefaults(cfg Config) Config {
	if cfg.MaxRequestBodyBytes <= 0 {
		cfg.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if cfg.RoutingHeader == "" {
		cfg.RoutingHeader = routing.Header
	}
	if cfg.MetadataNamespace == "" {
		cfg.MetadataNamespace = routing.MetadataNamespace
	}
	if cfg.Prices == nil {
		cfg.Prices = (*pricing.Table)(nil) // no prices
	}
	if cfg.Capture != nil {
		c := *cfg.Capture
		if c.MaxBytes <= 0 {
			c.MaxBytes = 64 << 10
		}
		// The backends' own credentials are hidden wherever a capture
		// holds them (a provider that echoes its key).
		c.Redact.Secrets = append(slices.Clip(c.Redact.Secrets), providerSecrets(cfg.Credentials)...)
		cfg.Capture = &c
	}
	if cfg.RequestLogSample <= 0 || cfg.RequestLogSample > 1 {
		cfg.RequestLogSample = 1
	}
	if cfg.Currency == "" {
		cfg.Currency = DefaultCurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.RequestLogger == nil {
		cfg.RequestLogger = cfg.Logger
	}
	if cfg.MaxAudioBodyBytes <= 0 {
		cfg.MaxAudioBodyBytes = DefaultMaxAudioBodyBytes
	}
	if cfg.ImageURLTTL <= 0 {
		cfg.ImageURLTTL = DefaultImageURLTTL
	}
	if len(cfg.ImageURLKey) == 0 {
		cfg.ImageURLKey = make([]byte, 32)
		rand.Read(cfg.ImageURLKey) //nolint:errcheck // crypto/rand.Read never fails
	}
	if len(cfg.Guardrails.MaskKey) == 0 {
		cfg.Guardrails.MaskKey = make([]byte, 32)
		rand.Read(cfg.Guardrails.MaskKey) //nolint:errcheck // crypto/rand.Read never fails
	}
	if cfg.UsageTimeout <= 0 {
		cfg.UsageTimeout = 5 * time.Second
	}
	if cfg.ResponseRetention <= 0 {
		cfg.ResponseRetention = DefaultResponseRetention
	}
	if cfg.DefaultOutputTokens <= 0 {
		cfg.DefaultOutputTokens = 1024
	}
	if cfg.MaxBufferedResponseBytes <= 0 {
		cfg.MaxBufferedResponseBytes = 8 << 20
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = 256 << 20
	}
	return cfg
}

// gatewayReplyKey marks the server's immediate responses in its metadata
// namespace (envoy.GatewayReplyKey): Envoy makes each a local reply, and
// the bootstrap's local_reply_config leaves the marked ones as they are
// instead of rewriting them as Envoy's own.
const gatewayReplyKey = "gateway_reply"

// markGatewayReply sets gatewayReplyKey in r's dynamic metadata, beside
// whatever else r writes there.
func (s *Server) markGatewayReply(r *extprocv3.ProcessingResponse) {
	s.setMetadata(r, gatewayReplyKey, structpb.NewBoolValue(true))
}

// setMetadata sets key to v in r's dynamic metadata, in the server's
// namespace, beside what r holds there already.
func (s *Server) setMetadata(r *extprocv3.ProcessingResponse, key string, v *structpb.Value) {
	if r.DynamicMetadata == nil {
		r.DynamicMetadata = &structpb.Struct{}
	}
	if r.DynamicMetadata.Fields == nil {
		r.DynamicMetadata.Fields = map[string]*structpb.Value{}
	}
	ns := r.DynamicMetadata.Fields[s.cfg.MetadataNamespace].GetStructValue()
	if ns == nil {
		ns = &structpb.Struct{}
		r.DynamicMetadata.Fields[s.cfg.MetadataNamespace] = structpb.NewStructValue(ns)
	}
	if ns.Fields == nil {
		ns.Fields = map[string]*structpb.Value{}
	}
	ns.Fields[key] = v
}

// ImageStore keeps the images a provider returned as bytes when the
// client asked for a URL. It must be safe for concurrent use.
type ImageStore interface {
	// SaveImage keeps an image until expires.
	SaveImage(ctx context.Context, accountID, id, contentType string, data []byte, expires time.Time) error
	// Image returns a kept image; unknown and expired ids give
	// authz.ErrNotFound.
	Image(ctx context.Context, id string, now time.Time) (contentType string, data []byte, err error)
}

// ResponseStore keeps the responses the gateway produced, so that
// previous_response_id works for every provider and clients can retrieve,
// list the input items of and delete them. It must be safe for concurrent
// use. authz.Store implements it.
type ResponseStore interface {
	// SaveResponse stores a response (its Response object and its
	// conversation, every item up to and including its output) for the
	// account until expires.
	SaveResponse(ctx context.Context, accountID, id string, r state.Response, expires time.Time) error
	// Conversation returns a stored conversation. Unknown and expired ids
	// and ids of another account give authz.ErrNotFound.
	Conversation(ctx context.Context, accountID, id string, now time.Time) ([]json.RawMessage, error)
	// Response returns a stored response, found as by Conversation.
	Response(ctx context.Context, accountID, id string, now time.Time) (state.Response, error)
	// DeleteResponse deletes a stored response, found as by Conversation.
	DeleteResponse(ctx context.Context, accountID, id string, now time.Time) error
	// ResponseOutputs returns the output items of the stored responses
	// among ids, by id, found as by Conversation (the others left out), in
	// one query however many the ids.
	ResponseOutputs(ctx context.Context, accountID string, ids []string, now time.Time) (map[string][]json.RawMessage, error)
}

// providerSecrets are the backends' credentials: a provider that echoes
// the key it was sent does not put it in a capture.
func providerSecrets(creds map[string]Credentials) []string {
	var out []string
	for _, c := range creds {
		for _, s := range []string{c.APIKey, c.AWS.AccessKeyID, c.AWS.SecretAccessKey, c.AWS.SessionToken} {
			if len(s) >= redact.MinSecretLen {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out) // the same list each time
	return out
}
