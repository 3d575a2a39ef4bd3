package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/authz"
	"modelgate/authz/postgres"
	"modelgate/authz/sqlite"
	"modelgate/cmd/modelgate/config"
	"modelgate/envoy"
	"modelgate/extproc"
	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
	redislimit "modelgate/ratelimit/redis"
)

// envoyBufferLimit is Envoy's per-connection buffer limit for a config. It
// is larger than the request body limit so that the gateway, not Envoy,
// answers oversized requests (with an OpenAI-shaped 413), and large enough
// for buffered responses such as base64 images.
func envoyBufferLimit(cfg *config.Config) int64 {
	if cfg.Envoy.BufferLimitBytes > 0 {
		return cfg.Envoy.BufferLimitBytes
	}
	return max(max(cfg.Limits.MaxRequestBodyBytes, cfg.Limits.MaxAudioBytes)+1<<20, 32<<20)
}

// grpcMaxMessage is the ext_proc server's receive limit: a buffered body of
// Envoy's buffer limit plus the headers around it (gRPC's default 4 MiB
// would fail larger bodies, which Envoy sends whole in BUFFERED mode).
func grpcMaxMessage(cfg *config.Config) int {
	return int(max(envoyBufferLimit(cfg), maxResponseBytes) + 1<<20)
}

// maxResponseBytes bounds an answer the gateway gathers itself (too
// large for Envoy's buffer); it travels back to Envoy in one message.
const maxResponseBytes = 256 << 20

// extprocConfig resolves credentials from the environment.
func extprocConfig(cfg *config.Config, getenv func(string) string, log *zap.Logger) (extproc.Config, error) {
	out := extproc.Config{MaxRequestBodyBytes: cfg.Limits.MaxRequestBodyBytes, Logger: log,
		ResponseRetention: cfg.Storage.ResponseRetention.Duration, MaxAudioBodyBytes: cfg.Limits.MaxAudioBytes,
		ImageURLTTL: cfg.Images.URLTTL.Duration, PublicBaseURL: cfg.Images.PublicBaseURL,
		KeyLimits: limitsOf(cfg.RateLimits.Key), AccountLimits: limitsOf(cfg.RateLimits.Account),
		RateLimitFailClosed: cfg.RateLimits.FailClosed,
		// Half the buffer: headers and the translation's growth fit beside.
		MaxBufferedResponseBytes: envoyBufferLimit(cfg) / 2, MaxResponseBytes: maxResponseBytes}
	if env := cfg.Images.URLKeyEnv; env != "" {
		key := getenv(env)
		if len(key) < 32 {
			return extproc.Config{}, fmt.Errorf("images.url_key_env: environment variable %s must hold at least 32 characters", env)
		}
		out.ImageURLKey = []byte(key)
	}
	for _, b := range cfg.Backends {
		eb, err := backend(b, getenv)
		if err != nil {
			return extproc.Config{}, err
		}
		out.Backends = append(out.Backends, eb)
	}
	for _, m := range cfg.Models {
		em := extproc.Model{ID: m.ID, OwnedBy: m.OwnedBy, Created: m.Created, ContextWindow: m.ContextWindow,
			Timeouts: extprocTimeouts(m.Timeouts)}
		for _, d := range m.Deployments {
			em.Deployments = append(em.Deployments, extproc.Deployment{Backend: d.Backend, Model: d.Model, Weight: d.Weight})
		}
		out.Models = append(out.Models, em)
	}
	return out, nil
}

func extprocTimeouts(t config.Timeouts) extproc.Timeouts {
	return extproc.Timeouts{ResponseHeaders: t.ResponseHeaders.Duration, StreamIdle: t.StreamIdle.Duration}
}

// backend resolves one backend's credentials from the environment.
func backend(b config.Backend, getenv func(string) string) (extproc.Backend, error) {
	out := extproc.Backend{Name: b.Name, Provider: b.Provider, BasePath: b.BasePath(), APIVersion: b.APIVersion,
		Host: b.Host(), Region: b.Region, Timeouts: extprocTimeouts(b.Timeouts)}
	if b.APIKeyEnv != "" {
		if out.APIKey = getenv(b.APIKeyEnv); out.APIKey == "" {
			return out, fmt.Errorf("backend %q: environment variable %s is not set", b.Name, b.APIKeyEnv)
		}
		return out, badCredential(b.Name, b.APIKeyEnv, out.APIKey)
	}
	switch b.Provider {
	case "vertex":
		return vertexBackend(out, b, getenv)
	case "bedrock":
	default:
		return out, nil
	}
	names := [3]string{or(b.AWSAccessKeyIDEnv, "AWS_ACCESS_KEY_ID"), or(b.AWSSecretAccessKeyEnv, "AWS_SECRET_ACCESS_KEY"),
		or(b.AWSSessionTokenEnv, "AWS_SESSION_TOKEN")}
	out.AWS.AccessKeyID, out.AWS.SecretAccessKey, out.AWS.SessionToken = getenv(names[0]), getenv(names[1]), getenv(names[2])
	if out.AWS.AccessKeyID == "" || out.AWS.SecretAccessKey == "" {
		return out, fmt.Errorf("backend %q: set api_key_env to a Bedrock API key, or %s and %s", b.Name, names[0], names[1])
	}
	for i, v := range []string{out.AWS.AccessKeyID, out.AWS.SecretAccessKey, out.AWS.SessionToken} {
		if err := badCredential(b.Name, names[i], v); err != nil {
			return out, err
		}
	}
	return out, nil
}

// badCredential refuses a credential that cannot be a header value: a
// secret file mounted with its trailing newline would otherwise fail every
// request, or split a header. The error names the variable, never the value.
func badCredential(backend, env, value string) error {
	if strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Errorf("backend %q: environment variable %s holds a line break or NUL (a trailing newline from a secret file?); remove it", backend, env)
	}
	return nil
}

// vertexBackend mints access tokens from the backend's service account,
// or from Application Default Credentials when it names none.
func vertexBackend(out extproc.Backend, b config.Backend, getenv func(string) string) (extproc.Backend, error) {
	var key []byte
	var err error
	switch {
	case b.ServiceAccountFile != "":
		key, err = os.ReadFile(b.ServiceAccountFile)
	case b.ServiceAccountEnv != "":
		if key = []byte(getenv(b.ServiceAccountEnv)); len(key) == 0 {
			err = fmt.Errorf("environment variable %s is not set", b.ServiceAccountEnv)
		}
	}
	if err != nil {
		return out, fmt.Errorf("backend %q: %w", b.Name, err)
	}
	tokens, err := googleTokens(key, b.TokenURL)
	if err != nil {
		return out, fmt.Errorf("backend %q: %w", b.Name, err)
	}
	out.Project, out.Token = b.Project, tokens
	return out, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// envoyConfig is what the Envoy bootstrap is generated from.
func envoyConfig(cfg *config.Config) envoy.Config {
	out := envoy.Config{
		Listen:           cfg.Envoy.Listen,
		ExtProcAddress:   cfg.Envoy.ExtProcAddress,
		MessageTimeout:   cfg.Envoy.MessageTimeout.Duration,
		RequestTimeout:   cfg.Envoy.RequestTimeout.Duration,
		BufferLimitBytes: uint32(envoyBufferLimit(cfg)),
	}
	for _, b := range cfg.Backends {
		eb := envoy.Backend{Name: b.Name, BaseURL: b.BaseURL, Timeouts: envoyTimeouts(b.Timeouts)}
		for _, m := range cfg.Models {
			if m.Timeouts == (config.Timeouts{}) || !servedBy(m, b.Name) {
				continue
			}
			eb.Models = append(eb.Models, envoy.ModelTimeouts{Model: m.ID, Timeouts: envoyTimeouts(m.Timeouts.Or(b.Timeouts))})
		}
		out.Backends = append(out.Backends, eb)
	}
	return out
}

func envoyTimeouts(t config.Timeouts) envoy.Timeouts {
	return envoy.Timeouts{ResponseHeaders: t.ResponseHeaders.Duration, StreamIdle: t.StreamIdle.Duration}
}

func servedBy(m config.Model, backend string) bool {
	for _, d := range m.Deployments {
		if d.Backend == backend {
			return true
		}
	}
	return false
}

// limitsOf turns configured limits into authz.Limits (zero: unlimited).
func limitsOf(l config.RateLimit) authz.Limits {
	set := func(v int64) *int64 {
		if v <= 0 {
			return nil
		}
		return &v
	}
	return authz.Limits{RequestsPerMinute: set(l.RequestsPerMinute), TokensPerMinute: set(l.TokensPerMinute),
		TokensPerDay: set(l.TokensPerDay), ConcurrentRequests: set(l.ConcurrentRequests)}
}

// newLimiter builds the configured rate limiter and what closes it.
func newLimiter(cfg *config.Config, getenv func(string) string) (ratelimit.Limiter, func() error, error) {
	if cfg.RateLimits.Store != "redis" {
		return memory.New(memory.Config{}), func() error { return nil }, nil
	}
	url := getenv(cfg.RateLimits.RedisURLEnv)
	if url == "" {
		return nil, nil, fmt.Errorf("rate_limits.redis_url_env: environment variable %s is not set", cfg.RateLimits.RedisURLEnv)
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("rate_limits: parsing the Redis URL: %w", err)
	}
	// Calls are bounded by the limiter's timeout; a retry after a lost
	// reply would count a request twice.
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	client := goredis.NewClient(opts)
	lim, err := redislimit.New(client, redislimit.Config{})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return lim, client.Close, nil
}

// openStore opens the store serve, keys and dev share: the PostgreSQL
// database whose URL is in storage.postgres_url_env's variable, else the
// SQLite file at sqlitePath. Errors name the variable, never the URL, which
// may hold a password.
func openStore(ctx context.Context, cfg *config.Config, sqlitePath string, getenv func(string) string) (authz.Store, error) {
	env := cfg.Storage.PostgresURLEnv
	if env == "" {
		s, err := sqlite.Open(ctx, sqlitePath)
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", sqlitePath, err)
		}
		return s, nil
	}
	url := getenv(env)
	if url == "" {
		return nil, fmt.Errorf("storage.postgres_url_env: environment variable %s is not set", env)
	}
	s, err := postgres.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("opening the PostgreSQL store in %s: %w", env, err)
	}
	return s, nil
}
