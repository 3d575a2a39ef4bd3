package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/authz"
	"modelgate/authz/postgres"
	"modelgate/authz/sqlite"
	"modelgate/extproc"
	"modelgate/extproc/config"
	"modelgate/extproc/guard"
	"modelgate/extproc/guard/services"
	"modelgate/ratelimit/memory"
	redislimit "modelgate/ratelimit/redis"
	"modelgate/translate/providers"
)

// grpcMaxMessage is the ext_proc server's receive limit: a buffered body of
// Envoy's buffer limit plus the headers around it (gRPC's default 4 MiB
// would fail larger bodies, which Envoy sends whole in BUFFERED mode).
func grpcMaxMessage(cfg *config.Config) int {
	return int(max(cfg.EnvoyBufferLimit(), maxResponseBytes) + 1<<20)
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
		RateLimitFailClosed: cfg.RateLimits.FailClosed, RequestLogSample: cfg.RequestLogSample(),
		// Half the buffer: headers and the translation's growth fit beside.
		MaxBufferedResponseBytes: cfg.EnvoyBufferLimit() / 2, MaxResponseBytes: maxResponseBytes,
		MessageTimeout: cfg.Envoy.MessageTimeout.Duration}
	prices, err := cfg.PriceTable()
	if err != nil {
		return extproc.Config{}, fmt.Errorf("prices: %w", err)
	}
	out.Prices, out.Currency = prices, cfg.Prices.Currency
	if env := cfg.Images.URLKeyEnv; env != "" {
		key := getenv(env)
		if len(key) < 32 {
			return extproc.Config{}, fmt.Errorf("images.url_key_env: environment variable %s must hold at least 32 characters", env)
		}
		out.ImageURLKey = []byte(key)
	}
	out.Routing = cfg.Routing()
	if out.Guardrails, err = guardrails(cfg.Guardrails, getenv); err != nil {
		return extproc.Config{}, err
	}
	for _, b := range cfg.Backends {
		creds, err := credentials(b, getenv)
		if err != nil {
			return extproc.Config{}, err
		}
		if out.Credentials == nil {
			out.Credentials = map[string]extproc.Credentials{}
		}
		out.Credentials[b.Name] = creds
	}
	return out, nil
}

// credentials resolves one backend's credentials from the environment.
func credentials(b config.Backend, getenv func(string) string) (extproc.Credentials, error) {
	var out extproc.Credentials
	if b.APIKeyEnv != "" {
		if out.APIKey = getenv(b.APIKeyEnv); out.APIKey == "" {
			return out, fmt.Errorf("backend %q: environment variable %s is not set", b.Name, b.APIKeyEnv)
		}
		return out, badCredential(b.Name, b.APIKeyEnv, out.APIKey)
	}
	switch p, _ := providers.Lookup(b.Provider); p.Credential {
	case providers.GoogleCloud:
		return vertexBackend(out, b, getenv)
	case providers.APIKey:
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
func vertexBackend(out extproc.Credentials, b config.Backend, getenv func(string) string) (extproc.Credentials, error) {
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
	out.Token = tokens
	return out, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
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

// newLimiter builds the configured rate limiter and budget counters, in
// the same store, sets them on ecfg, and returns what closes them and what
// pings their Redis (nil in memory).
func newLimiter(cfg *config.Config, ecfg *extproc.Config, getenv func(string) string) (func() error, func(context.Context) error, error) {
	if cfg.RateLimits.Store != "redis" {
		ecfg.Limiter, ecfg.Spender = memory.New(memory.Config{}), memory.NewSpender()
		return func() error { return nil }, nil, nil
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
	spender, err := redislimit.NewSpender(client, redislimit.Config{})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	ecfg.Limiter, ecfg.Spender = lim, spender
	ping := func(ctx context.Context) error { return client.Ping(ctx).Err() }
	return client.Close, ping, nil
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
			return nil, fmt.Errorf("opening %s: %w%s", sqlitePath, err, unwritableDir(sqlitePath))
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

// unwritableDir explains a SQLite database that could not be opened
// because this process may not write its directory (a volume owned by
// another user, the usual cause in a container); "" otherwise.
func unwritableDir(path string) string {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".modelgate-write-check-*")
	if err == nil {
		f.Close()
		os.Remove(f.Name())
		return ""
	}
	if !errors.Is(err, fs.ErrPermission) {
		return ""
	}
	return fmt.Sprintf(" (directory %s is not writable by uid %d: give it to that user, or set storage.sqlite_path elsewhere)", dir, os.Getuid())
}

// storeRetryMax bounds the wait between two attempts to open an
// unreachable PostgreSQL store.
const storeRetryMax = 30 * time.Second

// waitForStore opens the store as openStore does, but keeps trying while a
// PostgreSQL store cannot be opened (the database not up yet, a network
// failure), telling ready why it waits, until ctx ends. SQLite, an unset
// variable or a URL that does not parse fail at once.
func waitForStore(ctx context.Context, cfg *config.Config, getenv func(string) string, ready *readiness, log *zap.Logger) (authz.Store, error) {
	env := cfg.Storage.PostgresURLEnv
	if env == "" {
		return openStore(ctx, cfg, cfg.Storage.SQLitePath, getenv)
	}
	if url := getenv(env); url == "" {
		return openStore(ctx, cfg, "", getenv) // its error, naming the variable
	} else if _, err := pgxpool.ParseConfig(url); err != nil {
		return openStore(ctx, cfg, "", getenv) // its error, without the URL
	}
	for delay := time.Second; ; delay = min(2*delay, storeRetryMax) {
		s, err := openStore(ctx, cfg, "", getenv)
		if err == nil || ctx.Err() != nil {
			return s, err
		}
		ready.waitFor(reasonStore)
		log.Warn("the store is unavailable; retrying", zap.Error(err), zap.Duration("retry_in", delay))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// pingStore returns what tells whether store answers: its Ping method if
// it has one, else a key lookup that finds nothing, the query every
// request depends on.
func pingStore(store authz.Keys) func(context.Context) error {
	if p, ok := store.(interface{ Ping(context.Context) error }); ok {
		return p.Ping
	}
	return func(ctx context.Context) error {
		if _, err := store.KeyByHash(ctx, [32]byte{}); err != nil && !errors.Is(err, authz.ErrNotFound) {
			return err
		}
		return nil
	}
}

// guardrails are the config file's guardrails as the ext_proc server runs
// them.
func guardrails(g config.Guardrails, getenv func(string) string) (extproc.Guardrails, error) {
	w := g.WindowOrDefault()
	out := extproc.Guardrails{Window: guard.Window{Size: w.Size, Overlap: w.Overlap}, Budget: g.BudgetOrDefault()}
	if env := g.MaskKeyEnv; env != "" {
		key := getenv(env)
		if len(key) < 32 {
			return extproc.Guardrails{}, fmt.Errorf("guardrails.mask_key_env: environment variable %s must hold at least 32 characters", env)
		}
		out.MaskKey = []byte(key)
	}
	backends := map[string]*guard.Backend{}
	for _, sc := range g.Services {
		b, err := guardBackend(sc, getenv)
		if err != nil {
			return extproc.Guardrails{}, err
		}
		backends[sc.Name] = b
	}
	for _, r := range g.Rules {
		rule := &guard.Rule{Name: r.Name, Check: r.Check(), Optional: r.Optional, Conversation: r.Conversation, Models: r.Models, Whole: r.Whole}
		if b := backends[r.Service]; b != nil {
			rule.Backend, rule.Check = b, b.Type
		} else {
			rule.Patterns = r.Compiled()
		}
		if r.Failure == "open" {
			rule.Failure = guard.Open
		}
		switch r.Action {
		case "mask":
			rule.Action = guard.Mask
		case "monitor":
			rule.Action = guard.Monitor
		}
		if r.Phase == "response" {
			rule.Phase, rule.Kinds = guard.Response, r.TextKinds()
		} else {
			rule.Parts = r.TextParts()
		}
		out.Rules = append(out.Rules, rule)
	}
	return out, nil
}

// guardBackend is the guard service sc configures, its credentials read
// from the environment: a variable it names that is not set refuses the
// start, naming it.
func guardBackend(sc config.GuardService, getenv func(string) string) (*guard.Backend, error) {
	spec := services.Spec{Name: sc.Name, Type: sc.Type, URL: sc.URL, Language: sc.Language, Entities: sc.Entities,
		ScoreThreshold: sc.ScoreThreshold, Model: sc.Model, GuardrailID: sc.GuardrailID, GuardrailVersion: sc.GuardrailVersion,
		Region: sc.Region, SeverityThreshold: sc.SeverityThreshold, Template: sc.Template, ProjectID: sc.ProjectID}
	secret := func(field, env string, required bool) (string, error) {
		if env == "" {
			return "", nil
		}
		v := getenv(env)
		if v == "" && required {
			return "", fmt.Errorf("guardrails service %q: %s: environment variable %s is not set", sc.Name, field, env)
		}
		return v, badCredential("guard service "+sc.Name, env, v)
	}
	var err error
	if spec.APIKey, err = secret("api_key_env", sc.APIKeyEnv, true); err != nil {
		return nil, err
	}
	if spec.ServiceAccount, err = secret("service_account_env", sc.ServiceAccountEnv, true); err != nil {
		return nil, err
	}
	if sc.Type == "bedrock_guardrail" {
		id, key := or(sc.AWSAccessKeyIDEnv, "AWS_ACCESS_KEY_ID"), or(sc.AWSSecretAccessKeyEnv, "AWS_SECRET_ACCESS_KEY")
		if spec.AWSAccessKeyID, err = secret("aws_access_key_id_env", id, true); err != nil {
			return nil, err
		}
		if spec.AWSSecretAccessKey, err = secret("aws_secret_access_key_env", key, true); err != nil {
			return nil, err
		}
		if spec.AWSSessionToken, err = secret("aws_session_token_env", or(sc.AWSSessionTokenEnv, "AWS_SESSION_TOKEN"), false); err != nil {
			return nil, err
		}
	}
	svc, err := services.New(spec)
	if err != nil {
		return nil, err
	}
	b := guard.NewBackend(sc.Name, sc.Type, svc, sc.TimeoutOrDefault(), sc.ConcurrencyOrDefault())
	b.Price, _ = sc.Price() // checked when the config was read
	return b, nil
}
