package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"sigs.k8s.io/yaml"

	"modelgate/authz"
	"modelgate/cmd/mockprovider/guards"
	"modelgate/cmd/mockprovider/replay"
	"modelgate/cmd/modelgate/wiring"
	"modelgate/envoy"
	"modelgate/envoy/standin"
	"modelgate/extproc/config"
	"modelgate/testdata"
)

// devModels are the models `modelgate dev` serves when no --config is
// given. They all go to the built-in mock provider; the mock picks a
// recorded scenario by the upstream model name.
const devModels = `
models:
  - id: gpt-4o-mini
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: gpt-4o-mini}]
  - id: gpt-4o
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: gpt-4o}]
  - id: mock-tools
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: mock-tools}]
  - id: mock-error-400
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: mock-error-400}]
  - id: mock-slow
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: mock-slow}]
  - id: mock-truncated
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: mock-truncated}]
  - id: claude-sonnet
    owned_by: modelgate-mock
    deployments: [{backend: mock-anthropic, model: claude-sonnet-4-20250514}]
  - id: claude-tools
    owned_by: modelgate-mock
    deployments: [{backend: mock-anthropic, model: mock-tools}]
  - id: gemini-flash
    owned_by: modelgate-mock
    deployments: [{backend: mock-gemini, model: gemini-2.5-flash}]
  - id: gemini-tools
    owned_by: modelgate-mock
    deployments: [{backend: mock-gemini, model: mock-tools}]
  - id: command-r
    owned_by: modelgate-mock
    deployments: [{backend: mock-cohere, model: command-r7b-12-2024}]
  - id: command-r-tools
    owned_by: modelgate-mock
    deployments: [{backend: mock-cohere, model: mock-tools}]
  - id: nova-micro
    owned_by: modelgate-mock
    deployments: [{backend: mock-bedrock, model: "us.amazon.nova-micro-v1:0"}]
  - id: nova-tools
    owned_by: modelgate-mock
    deployments: [{backend: mock-bedrock, model: mock-tools}]
  - id: azure-gpt
    owned_by: modelgate-mock
    deployments: [{backend: mock-azure, model: gpt-5-nano}]
  - id: gpt-roundtrip
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: mock-roundtrip}]
  - id: azure-roundtrip
    owned_by: modelgate-mock
    deployments: [{backend: mock-azure, model: mock-roundtrip}]
  - id: mistral-roundtrip
    owned_by: modelgate-mock
    deployments: [{backend: mock-mistral, model: mock-roundtrip}]
  - id: magistral
    owned_by: modelgate-mock
    deployments: [{backend: mock-mistral, model: magistral-medium-latest}]
  - id: vertex-gemini
    owned_by: modelgate-mock
    deployments: [{backend: mock-vertex, model: gemini-2.0-flash}]
  - id: vertex-claude
    owned_by: modelgate-mock
    deployments: [{backend: mock-vertex, model: claude-sonnet-4@20250514}]
  - id: vertex-gemini-tools
    owned_by: modelgate-mock
    deployments: [{backend: mock-vertex, model: mock-tools}]
  - id: vertex-claude-tools
    owned_by: modelgate-mock
    deployments: [{backend: mock-vertex, model: claude-mock-tools}]
  - id: agent-gpt
    owned_by: modelgate-mock
    context_window: 400000
    reasoning_efforts: [minimal, low, medium, high]
    deployments: [{backend: mock, model: mock-agent}]
  - id: agent-claude
    owned_by: modelgate-mock
    context_window: 200000
    reasoning_efforts: [minimal, low, medium, high]
    deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]
  - id: agent-gemini
    owned_by: modelgate-mock
    context_window: 1048576
    reasoning_efforts: [minimal, low, medium, high]
    deployments: [{backend: mock-gemini, model: gemini-3-mock-agent}]
  - id: agent-bedrock
    owned_by: modelgate-mock
    context_window: 200000
    reasoning_efforts: [minimal, low, medium, high]
    deployments: [{backend: mock-bedrock, model: "us.anthropic.claude-sonnet-4-5-mock-agent-v1:0"}]
  - id: text-embedding-3-small
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: text-embedding-3-small}]
  - id: azure-embedding
    owned_by: modelgate-mock
    deployments: [{backend: mock-azure, model: text-embedding-3-small}]
  - id: mistral-embed
    owned_by: modelgate-mock
    deployments: [{backend: mock-mistral, model: mistral-embed}]
  - id: gemini-embedding
    owned_by: modelgate-mock
    deployments: [{backend: mock-gemini, model: gemini-embedding-001}]
  - id: vertex-embedding
    owned_by: modelgate-mock
    deployments: [{backend: mock-vertex, model: text-embedding-005}]
  - id: titan-embed
    owned_by: modelgate-mock
    deployments: [{backend: mock-bedrock, model: "amazon.titan-embed-text-v2:0"}]
  - id: bedrock-cohere-embed
    owned_by: modelgate-mock
    deployments: [{backend: mock-bedrock, model: "cohere.embed-english-v3"}]
  - id: cohere-embed
    owned_by: modelgate-mock
    deployments: [{backend: mock-cohere, model: embed-v4.0}]
  - id: dall-e-3
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: dall-e-3}]
  - id: gpt-image-1-mini
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: gpt-image-1-mini}]
  - id: azure-dall-e-3
    owned_by: modelgate-mock
    deployments: [{backend: mock-azure, model: dall-e-3}]
  - id: imagen
    owned_by: modelgate-mock
    deployments: [{backend: mock-gemini, model: imagen-4.0-generate-001}]
  - id: imagen-filtered
    owned_by: modelgate-mock
    deployments: [{backend: mock-gemini, model: mock-filtered}]
  - id: vertex-imagen
    owned_by: modelgate-mock
    deployments: [{backend: mock-vertex, model: imagen-4.0-generate-001}]
  - id: nova-canvas
    owned_by: modelgate-mock
    deployments: [{backend: mock-bedrock, model: "amazon.nova-canvas-v1:0"}]
  - id: whisper-1
    owned_by: modelgate-mock
    deployments: [{backend: mock, model: whisper-1}]
  - id: azure-whisper
    owned_by: modelgate-mock
    deployments: [{backend: mock-azure, model: whisper}]
  - id: groq-whisper
    owned_by: modelgate-mock
    deployments: [{backend: mock-groq, model: whisper-large-v3-turbo}]
` + devGuardrails

// devGuardrails are example guardrails on two of the scripted models,
// which answer "You said: " and the prompt: a prompt with forbidden-word
// is refused, zebra-42 in an answer is masked, a credential in an answer
// is recorded (docs/guardrails.md).
const devGuardrails = `
guardrails:
  rules:
    - {name: example-no-forbidden, phase: request, regex: {patterns: ["(?i)forbidden-word"]}, action: block, models: [agent-gpt, agent-claude]}
    - {name: example-mask-zebra, phase: response, regex: {patterns: ["zebra-[0-9]+"]}, action: mask, models: [agent-gpt, agent-claude]}
    - {name: example-credentials, phase: response, secrets: true, action: monitor, models: [agent-gpt, agent-claude]}
`

// devBackends are the built-in mock backends, name and provider: the one
// mock provider speaking each provider's wire format.
func devBackends() [][2]string {
	return [][2]string{{"mock", "openai"}, {"mock-anthropic", "anthropic"}, {"mock-gemini", "gemini"}, {"mock-cohere", "cohere"}, {"mock-bedrock", "bedrock"}, {"mock-azure", "azure"}, {"mock-mistral", "mistral"}}
}

func isDevBackend(name string) bool {
	for _, b := range devBackends() {
		if b[0] == name {
			return true
		}
	}
	return false
}

// devAddrs tells tests where a dev gateway listens.
type devAddrs struct {
	Gateway string // the OpenAI base URL, ending in /v1
	Admin   string
	APIKey  string
	Mock    *replay.Server
	// AdminToken signs in to the dashboard at Admin + "/admin/".
	AdminToken string
}

func runDev(ctx context.Context, args []string, e env) error {
	c := newCommand("dev", e, cmdHelp{
		synopsis: "modelgate dev [--config F] [--listen ADDR] [--admin-listen ADDR] [--data-dir DIR]",
		about: `Runs everything in one process, without Docker or provider keys: the Envoy
stand-in serving the OpenAI API on --listen, the ext_proc server, the admin
endpoint (/metrics, /healthz, /readyz, the dashboard at /admin/) on
--admin-listen, SQLite in --data-dir, and a mock provider replaying recorded
traffic of every supported provider. It prints the base URL, an API key and
an admin token. Stopped, it lets open requests finish for up to 5s.

The API key is kept in <data dir>/dev-key (mode 0600), so a restart prints
the same key while it still works; otherwise dev creates a new one and
rewrites the file. MODELGATE_DEV_API_KEY=<value> registers and uses that key
instead; MODELGATE_ADMIN_TOKEN (or the config's admin.token_env) sets the
admin token.`,
		example: "modelgate dev\nmodelgate dev --config my-models.yaml --listen 127.0.0.1:9090 --data-dir /tmp/mg",
	})
	path := c.String("config", "", "`F` a configuration file (default: the built-in mock models)")
	listen := c.String("listen", "127.0.0.1:8080", "`ADDR` the client-facing address, the Envoy stand-in's")
	adminListen := c.String("admin-listen", "127.0.0.1:8081", "`ADDR` the admin address: /metrics, /healthz, the dashboard at /admin/")
	dataDir := c.String("data-dir", ".modelgate", "`DIR` where the SQLite database and the dev key live")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.noArgs(); err != nil {
		return err
	}
	log := newLogger(e.stderr)
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush
	d := &devStack{log: log, e: e}
	defer d.close()
	if err := d.start(ctx, *path, *listen, *adminListen, *dataDir); err != nil {
		return err
	}
	return d.wait(ctx)
}

// devStack is everything `modelgate dev` runs, in one process.
type devStack struct {
	log     *zap.Logger
	e       env
	store   authz.Store
	mock    *http.Server
	proxy   *http.Server
	standin *standin.Proxy
	gateway *gateway
	errc    chan error
	stopped chan struct{} // closed when the gateway has stopped
	// adminTokenEnv names the variable the admin token came from; empty
	// when dev made the token.
	adminTokenEnv string
}

func (d *devStack) start(ctx context.Context, path, listen, adminListen, dataDir string) error {
	d.errc = make(chan error, 8)
	mockKey, err := authz.GenerateKey()
	if err != nil {
		return err
	}
	mock, mockURL, err := d.startMock(mockKey)
	if err != nil {
		return err
	}
	cfg, err := devConfig(path, mockURL)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	// SQLite in the data dir, unless the config names a PostgreSQL URL.
	if d.store, err = openStore(ctx, cfg, filepath.Join(dataDir, "modelgate.db"), d.e.getenv); err != nil {
		return err
	}
	key, keyNote, err := devKey(ctx, d.store, dataDir, d.e.getenv("MODELGATE_DEV_API_KEY"))
	if err != nil {
		return err
	}
	vertexSA, err := devServiceAccount(mockURL + "/token")
	if err != nil {
		return err
	}
	adminToken, err := d.adminToken(cfg)
	if err != nil {
		return err
	}
	getenv := func(name string) string {
		switch name {
		case cfg.Admin.TokenEnv:
			return adminToken
		case devMockKeyEnv:
			return mockKey
		case devVertexSAEnv:
			return vertexSA
		case devGuardAWSKeyEnv:
			return guards.AWSAccessKeyID
		case devGuardAWSSecretEnv:
			return guards.AWSSecretAccessKey
		}
		return d.e.getenv(name)
	}
	if d.gateway, err = newGateway(cfg, d.store, getenv, d.log); err != nil {
		return err
	}
	d.gateway.grace = devShutdownGrace
	grpcL, adminL, err := listenPair("127.0.0.1:0", adminListen)
	if err != nil {
		return err
	}
	d.stopped = make(chan struct{})
	go func() {
		defer close(d.stopped)
		if err := d.gateway.run(ctx, grpcL, adminL); err != nil {
			d.errc <- err
		}
	}()
	proxyL, err := d.startProxy(cfg, listen, grpcL.Addr().String())
	if err != nil {
		return err
	}
	addrs := devAddrs{Gateway: "http://" + proxyL + "/v1", Admin: "http://" + adminL.Addr().String(), APIKey: key, Mock: mock,
		AdminToken: adminToken}
	d.announce(addrs, keyNote)
	return nil
}

// devShutdownGrace is how long dev, stopped, lets open requests finish;
// it ignores server.shutdown_grace, as it does the config's listeners.
const devShutdownGrace = 5 * time.Second

// devMockKeyEnv and devVertexSAEnv are the pseudo environment variables
// holding the mock provider's credential and the throwaway service account
// whose tokens the mock's token endpoint issues; dev makes both per run.
const (
	devMockKeyEnv  = "MODELGATE_DEV_MOCK_KEY"
	devVertexSAEnv = "MODELGATE_DEV_VERTEX_SERVICE_ACCOUNT"
	// devGuardAWSKeyEnv and devGuardAWSSecretEnv hold the credentials the
	// Bedrock guardrail emulator checks signatures with.
	devGuardAWSKeyEnv    = "MODELGATE_DEV_GUARD_AWS_KEY"
	devGuardAWSSecretEnv = "MODELGATE_DEV_GUARD_AWS_SECRET"
)

// devServiceAccount makes a service-account key file for the mock's token
// endpoint, so the Vertex AI path runs its real token flow in dev.
func devServiceAccount(tokenURL string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	sa, err := json.Marshal(map[string]string{"type": "service_account", "client_email": "modelgate-dev@dev-project.iam.gserviceaccount.com",
		"private_key_id": "dev", "private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": tokenURL})
	return string(sa), err
}

func devConfig(path, mockURL string) (*config.Config, error) {
	var cfg *config.Config
	var err error
	if path == "" {
		cfg, err = config.Parse([]byte(devModelsWithBackend(mockURL)))
	} else {
		cfg, err = loadWithDevBackends(path)
	}
	if err != nil {
		return nil, err
	}
	for i, b := range cfg.Backends {
		switch { // a config may use the built-in mocks too
		case isDevBackend(b.Name):
			cfg.Backends[i].BaseURL, cfg.Backends[i].APIKeyEnv = mockURL, devMockKeyEnv
		case b.Name == "mock-groq": // Groq serves the OpenAI API under /openai
			cfg.Backends[i].BaseURL, cfg.Backends[i].APIKeyEnv = mockURL+"/openai", devMockKeyEnv
		case b.Name == "mock-vertex":
			cfg.Backends[i].BaseURL, cfg.Backends[i].ServiceAccountEnv = mockURL, devVertexSAEnv
		}
	}
	for i := range cfg.Guardrails.Services {
		devGuardService(&cfg.Guardrails.Services[i], mockURL)
	}
	return cfg, nil
}

// loadWithDevBackends loads a config file in which the built-in mock
// backends (devBackends) need not be declared: a file of models alone
// runs on them, its own backends beside them.
func loadWithDevBackends(path string) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil || file == nil {
		return config.Load(path) // its errors, with the file's name
	}
	declared, _ := file["backends"].([]any)
	for _, nb := range devBackends() {
		if !slices.ContainsFunc(declared, func(b any) bool { m, _ := b.(map[string]any); return m["name"] == nb[0] }) {
			declared = append(declared, map[string]any{"name": nb[0], "provider": nb[1], "base_url": "http://mock.invalid"})
		}
	}
	file["backends"] = declared
	if data, err = yaml.Marshal(file); err != nil {
		return nil, err
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// devGuardService wires a guard service whose url is "mock", or starts
// with "mock/", to the mock provider's emulator of its contract
// (cmd/mockprovider/guards: "mock/faults/hang" is the hanging one), with
// the credentials the emulators take.
func devGuardService(s *config.GuardService, mockURL string) {
	rest, ok := strings.CutPrefix(s.URL, "mock")
	if !ok || rest != "" && rest[0] != '/' {
		return
	}
	s.URL = mockURL + "/guard" + rest
	switch s.Type {
	case "bedrock_guardrail":
		s.AWSAccessKeyIDEnv, s.AWSSecretAccessKeyEnv = devGuardAWSKeyEnv, devGuardAWSSecretEnv
	case "model_armor":
		s.ServiceAccountEnv = devVertexSAEnv
	default:
		s.APIKeyEnv = devMockKeyEnv
	}
}

func devModelsWithBackend(mockURL string) string {
	var b strings.Builder
	b.WriteString("backends:\n")
	for _, nb := range devBackends() {
		fmt.Fprintf(&b, "  - {name: %s, provider: %s, base_url: %q, api_key_env: %s}\n", nb[0], nb[1], mockURL, devMockKeyEnv)
	}
	fmt.Fprintf(&b, "  - {name: mock-groq, provider: groq, base_url: %q, api_key_env: %s}\n", mockURL+"/openai", devMockKeyEnv)
	fmt.Fprintf(&b, "  - {name: mock-vertex, provider: vertex, base_url: %q, project: dev-project, region: us-central1, service_account_env: %s}\n",
		mockURL, devVertexSAEnv)
	return b.String() + devModels
}

// devKeyFile is the file in the data dir where dev keeps its API key, so
// that a restart prints the same key: the store has only its hash.
const devKeyFile = "dev-key"

// devKey returns dev's API key and the note announce prints after it. The
// key is the one in MODELGATE_DEV_API_KEY, registered if need be; else the
// one kept in dataDir's key file if it still authenticates against store;
// else a new one, which it writes to that file.
func devKey(ctx context.Context, store authz.Store, dataDir, fromEnv string) (key, note string, err error) {
	a, _, err := ensureAccount(ctx, store, "dev")
	if err != nil {
		return "", "", err
	}
	if fromEnv != "" {
		_, err := authz.RegisterKey(ctx, store, a.ID, "dev (MODELGATE_DEV_API_KEY)", fromEnv, nil)
		if errors.Is(err, authz.ErrExists) {
			err = nil
		}
		return fromEnv, "", err
	}
	path := filepath.Join(dataDir, devKeyFile)
	kept, err := keptDevKey(ctx, store, path)
	if err != nil || kept != "" {
		return kept, "(kept in " + path + ")", err
	}
	secret, _, err := authz.CreateKey(ctx, store, a.ID, "dev", nil)
	if err != nil {
		return "", "", err
	}
	if err := writeSecretFile(path, secret+"\n"); err != nil {
		return "", "", fmt.Errorf("keeping the dev key: %w", err)
	}
	return secret, "(new; kept in " + path + ")", nil
}

// keptDevKey returns the key in the file at path if it authenticates
// against store, and "" if there is no such file or its key does not
// (unknown to this store, revoked, expired or disabled).
func keptDevKey(ctx context.Context, store authz.PrincipalStore, path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the dev key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	_, err = authz.NewAuthenticator(store, authz.AuthenticatorConfig{}).Authenticate(ctx, key)
	switch {
	case errors.Is(err, authz.ErrUnauthenticated), errors.Is(err, authz.ErrDisabled):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("checking the dev key in %s: %w", path, err)
	}
	os.Chmod(path, 0o600) //nolint:errcheck // best effort: it was written 0600
	return key, nil
}

// writeSecretFile replaces the file at path with one holding data that
// only its owner may read, without a moment when it is partly written.
func writeSecretFile(path, data string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*") // mode 0600
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func (d *devStack) startMock(apiKey string) (*replay.Server, string, error) {
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: apiKey})
	if err != nil {
		return nil, "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	d.mock = &http.Server{Handler: mock, ReadHeaderTimeout: 10 * time.Second}
	go d.serveHTTP(d.mock, l)
	return mock, "http://" + l.Addr().String(), nil
}

func (d *devStack) startProxy(cfg *config.Config, listen, extprocAddr string) (string, error) {
	ec := wiring.EnvoyConfig(cfg)
	ec.Listen, ec.ExtProcAddress = listen, extprocAddr
	if ec.Tracing.Collector != "" {
		// The stand-in makes no spans of its own; the gateway's are
		// children of each request's traceparent.
		d.log.Info("observability.tracing.envoy: the Envoy stand-in does not trace; a real Envoy would")
		ec.Tracing = envoy.Tracing{}
	}
	b, err := envoy.Bootstrap(ec)
	if err != nil {
		return "", err
	}
	if d.standin, err = standin.New(b); err != nil {
		return "", fmt.Errorf("starting the Envoy stand-in: %w", err)
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return "", err
	}
	d.proxy = &http.Server{Handler: d.standin, ReadHeaderTimeout: 10 * time.Second}
	go d.serveHTTP(d.proxy, l)
	return l.Addr().String(), nil
}

func (d *devStack) serveHTTP(s *http.Server, l net.Listener) {
	if err := s.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		d.errc <- err
	}
}

func listenPair(a, b string) (net.Listener, net.Listener, error) {
	la, err := net.Listen("tcp", a)
	if err != nil {
		return nil, nil, err
	}
	lb, err := net.Listen("tcp", b)
	if err != nil {
		la.Close()
		return nil, nil, err
	}
	return la, lb, nil
}

// announce prints where dev listens and its key; keyNote is empty when the
// key came from MODELGATE_DEV_API_KEY.
func (d *devStack) announce(a devAddrs, keyNote string) {
	fmt.Fprintf(d.e.stdout, "modelgate dev is running.\n\n  OPENAI_BASE_URL=%s\n", a.Gateway)
	if keyNote != "" {
		fmt.Fprintf(d.e.stdout, "  OPENAI_API_KEY=%s   %s\n", a.APIKey, keyNote)
	} else {
		fmt.Fprintf(d.e.stdout, "  OPENAI_API_KEY=$MODELGATE_DEV_API_KEY\n")
	}
	d.announceAdmin(a)
	fmt.Fprintf(d.e.stdout, "\n  metrics: %s/metrics\n\nTry:\n  curl $OPENAI_BASE_URL/models -H \"Authorization: Bearer $OPENAI_API_KEY\"\n", a.Admin)
	if d.e.ready != nil {
		d.e.ready(a)
	}
}

func (d *devStack) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.errc:
		return err
	}
}

func (d *devStack) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if d.proxy != nil {
		d.proxy.Shutdown(ctx) //nolint:errcheck // shutting down anyway
	}
	// The stand-in first: it holds idle connections to the mock, which
	// the mock's Shutdown would otherwise wait out.
	if d.standin != nil {
		d.standin.Close()
	}
	if d.mock != nil {
		d.mock.Shutdown(ctx) //nolint:errcheck // shutting down anyway
	}
	if d.stopped != nil {
		d.gateway.stop()
		<-d.stopped // the store outlives every request
	}
	if d.store != nil {
		d.store.Close()
	}
}
