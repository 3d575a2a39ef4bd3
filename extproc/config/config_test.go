package config

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const valid = `
backends:
  - name: openai-main
    provider: openai
    base_url: https://api.openai.com
    api_key_env: OPENAI_API_KEY
  - name: groq
    provider: openai-compatible
    base_url: https://api.groq.com/openai/
models:
  - id: gpt-4o
    owned_by: openai
    deployments:
      - {backend: openai-main, model: gpt-4o-2024-08-06, weight: 1}
`

func TestParseValid(t *testing.T) {
	cfg, err := Parse([]byte(valid))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := cfg.Envoy.MessageTimeout.Duration, 10*time.Second; got != want {
		t.Errorf("default message_timeout = %v, want %v", got, want)
	}
	if got, want := cfg.Limits.MaxRequestBodyBytes, int64(10<<20); got != want {
		t.Errorf("default max_request_body_bytes = %d, want %d", got, want)
	}
	if got, want := cfg.Storage.ResponseRetention.Duration, 30*24*time.Hour; got != want {
		t.Errorf("default response_retention = %v, want %v", got, want)
	}
	if got := cfg.Routing().Backends[1].BasePath(); got != "/openai" {
		t.Errorf("BasePath = %q, want /openai", got)
	}
	if got := cfg.Routing().Backends[0].BasePath(); got != "" {
		t.Errorf("BasePath = %q, want empty", got)
	}
}

func TestParseReportsEveryProblemWithItsLocation(t *testing.T) {
	bad := `
server: {grpc_listen: ":1", admin_lisen: ":2"}
envoy: {message_timeout: 2h}
storage: {response_retention: 10s, postgres_url_env: "postgres://u:pw@db/modelgate"}
backends:
  - {name: openai-main, provider: openai, base_url: https://api.openai.com/v1}
  - {name: openai-main, provider: antropic, base_url: "ftp://x", bas_url: y}
  - {name: "Bad Name", provider: openai, base_url: ""}
models:
  - id: m
    deployments:
      - {backend: nope, model: ""}
  - id: m
    deployments: []
  - id: r
    context_window: -1
    reasoning_efforts: [medium, extreme]
    deployments: [{backend: openai-main, model: x}]
`
	_, err := Parse([]byte(bad))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Parse error = %v, want *Error", err)
	}
	want := []string{
		`backends[1].bas_url: unknown key; did you mean "base_url"?`,
		`server.admin_lisen: unknown key; did you mean "admin_listen"?`,
		"envoy.message_timeout: must be between 0 and 1h",
		"storage.postgres_url_env: is not an environment variable name: name the variable that holds the URL",
		"storage.response_retention: must be between 1m and 8784h (a year)",
		"backends[0].base_url: must not end in /v1: the gateway appends /v1/... itself",
		`backends[1].provider: "antropic" is not one of ` + strings.Join(Providers, ", "),
		`backends[1].base_url: scheme must be http or https, not "ftp"`,
		`backends[1].name: duplicate backend "openai-main"`,
		`backends[2].name: "Bad Name" must be 1-63 lower-case letters, digits, '.', '_' or '-'`,
		"backends[2].base_url: is required",
		`models[0].deployments[0].backend: unknown backend "nope"`,
		"models[0].deployments[0].model: is required",
		"models[1].deployments: needs at least one deployment",
		`models[1].id: duplicate model "m"`,
		"models[2].context_window: must not be negative",
		`models[2].reasoning_efforts[1]: "extreme" is not one of none, minimal, low, medium, high, xhigh`,
	}
	if diff := cmp.Diff(want, cerr.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestPostgresURLEnv(t *testing.T) {
	cfg, err := Parse([]byte("storage: {postgres_url_env: MODELGATE_POSTGRES_URL}\n"))
	if err != nil || cfg.Storage.PostgresURLEnv != "MODELGATE_POSTGRES_URL" {
		t.Errorf("Parse = %+v, %v", cfg, err)
	}
}

func TestParseWrongType(t *testing.T) {
	_, err := Parse([]byte("limits: {max_request_body_bytes: lots}\n"))
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 1 {
		t.Fatalf("Parse error = %v, want one problem", err)
	}
	if got, want := cerr.Problems[0], `limits.max_request_body_bytes: want an integer, got "lots"`; got != want {
		t.Errorf("problem = %q, want %q", got, want)
	}
}

func TestAPIVersionStaysAString(t *testing.T) {
	for _, v := range []string{`2024-10-21`, `"2024-10-21"`} {
		cfg, err := Parse([]byte("backends: [{name: az, provider: azure, base_url: 'https://r.openai.azure.com', api_version: " + v + "}]\n"))
		if err != nil || cfg.Backends[0].APIVersion != "2024-10-21" {
			t.Errorf("api_version %s: %v, %+v", v, err, cfg)
		}
	}
}

// The configuration reference in docs/configuration.md is a valid
// configuration.
func TestDocsConfigReferenceParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Configuration reference\n\n```yaml\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/configuration.md has no yaml block under Configuration reference")
	}
	cfg, err := Parse([]byte(block))
	if err != nil {
		t.Fatalf("docs/configuration.md config: %v", err)
	}
	if len(cfg.Backends) < 5 {
		t.Errorf("docs/configuration.md config has %d backends", len(cfg.Backends))
	}
}

// Timeouts default per backend, a model's override member by member, and
// negative ones are refused where they are.
func TestTimeouts(t *testing.T) {
	cfg, err := Parse([]byte(`
backends:
  - {name: a, provider: openai, base_url: "https://api.openai.com", timeouts: {stream_idle: 5s}}
models:
  - {id: m, timeouts: {response_headers: 900s}, deployments: [{backend: a, model: x}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Backends[0].Timeouts
	if b.ResponseHeaders.Duration != 300*time.Second || b.StreamIdle.Duration != 5*time.Second {
		t.Errorf("backend timeouts = %+v, want 300s default and 5s", b)
	}
	m := cfg.Models[0].Timeouts.Or(b)
	if m.ResponseHeaders.Duration != 900*time.Second || m.StreamIdle.Duration != 5*time.Second {
		t.Errorf("model timeouts = %+v, want 900s and the backend's 5s", m)
	}
	_, err = Parse([]byte(`
backends:
  - {name: a, provider: openai, base_url: "https://api.openai.com", timeouts: {stream_idle: -5s}}
models:
  - {id: "m\n", timeouts: {response_headers: -1s}, deployments: [{backend: a, model: x}]}
`))
	for _, want := range []string{"backends[0].timeouts.stream_idle", "models[0].timeouts.response_headers", "models[0].id"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// Values of the wrong type keep their location and stop nothing: every
// problem of the file is reported at once, with the known key a misspelt
// one is closest to, and without repeating a wrong value's problem as
// problems of what it holds.
func TestParseReportsWrongTypesWithTheRest(t *testing.T) {
	bad := `
server: {grpc_listen: 50051, Admin_Listen: ":2", gprc_listen: x, listen: y}
envoy: {message_timeout: 10, request_timeout: soon, buffer_limit_bytes: 1.5}
admin: {secure_cookies: "yes"}
limits: {max_audio_bytes: 9223372036854775808}
rate_limit: {}
backends:
  - {name: a, provider: openai, base_url: "https://x", timeouts: {stream_idle: 120s}}
  - {name: b, provider: openai, base_url: "https://y", timeouts: {stream_idle: "10", response_headers: [1]}}
  - {name: c, provider: openai, base_url: "https://z", timeouts: 5, api_version: 2024}
  - 7
models:
  - {id: m, context_window: big, deployments: [{backend: a, model: x, weight: "1"}], deploymnets: []}
  - {id: n, created: yesterday, deployments: {backend: a}}
  - {id: o, deployments: [{backend: ghost, model: ""}], ID: p}
`
	_, err := Parse([]byte(bad))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Parse error = %v, want *Error", err)
	}
	want := []string{
		`admin.secure_cookies: want true or false, got "yes"`,
		`backends[1].timeouts.response_headers: want a duration such as "10s", got a list`,
		`backends[1].timeouts.stream_idle: "10" is not a duration such as "10s"`,
		`backends[2].api_version: want a string, got 2024: quote it`,
		`backends[2].timeouts: want an object, got 5`,
		`backends[3]: want an object, got 7`,
		`envoy.buffer_limit_bytes: want an integer, got 1.5`,
		`envoy.message_timeout: "10" is not a duration such as "10s"`,
		`envoy.request_timeout: "soon" is not a duration such as "10s"`,
		`limits.max_audio_bytes: 9223372036854775808 is out of range`,
		`models[0].context_window: want an integer, got "big"`,
		`models[0].deployments[0].weight: want an integer, got "1"`,
		`models[0].deploymnets: unknown key; did you mean "deployments"?`,
		`models[1].created: want an integer, got "yesterday"`,
		`models[1].deployments: want a list, got an object`,
		// YAML reads a bare n as false.
		`models[1].id: want a string, got false: quote it`,
		`models[2].ID: unknown key; did you mean "id"?`,
		`rate_limit: unknown key; did you mean "rate_limits"?`,
		`server.Admin_Listen: unknown key; did you mean "admin_listen"?`,
		`server.gprc_listen: unknown key; did you mean "grpc_listen"?`,
		`server.grpc_listen: want a string, got 50051: quote it`,
		`server.listen: unknown key`,
		// Problems found after decoding are reported with those above.
		`models[2].deployments[0].backend: unknown backend "ghost"`,
		`models[2].deployments[0].model: is required`,
	}
	if diff := cmp.Diff(want, cerr.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		fields    map[string]reflect.Type
		key, want string
	}{
		{jsonFields(typeOf[Backend]()), "bas_url", "base_url"},
		{jsonFields(typeOf[Backend]()), "baseurl", "base_url"},
		{jsonFields(typeOf[Backend]()), "BASE_URL", "base_url"}, // equal but for case
		{jsonFields(typeOf[Backend]()), "base_ulr", "base_url"}, // a transposition is one edit
		{jsonFields(typeOf[Backend]()), "providre", "provider"},
		{jsonFields(typeOf[Backend]()), "nmae", "name"},
		{jsonFields(typeOf[Backend]()), "apikey", ""}, // api_key_env is 5 edits away
		{jsonFields(typeOf[Backend]()), "service_account", ""},
		{jsonFields(typeOf[Model]()), "ID", "id"},
		{jsonFields(typeOf[Model]()), "ix", "id"},
		{jsonFields(typeOf[Model]()), "xy", ""}, // as many edits as characters
		{jsonFields(typeOf[Model]()), "model", ""},
	} {
		want := ""
		if tc.want != "" {
			want = `; did you mean "` + tc.want + `"?`
		}
		if got := didYouMean(tc.key, tc.fields); got != want {
			t.Errorf("didYouMean(%q) = %q, want %q", tc.key, got, want)
		}
	}
}

// A key without a value is absent, durations included.
func TestNullIsAbsent(t *testing.T) {
	cfg, err := Parse([]byte("server:\nenvoy: {message_timeout: }\nbackends:\n"))
	if err != nil || cfg.Envoy.MessageTimeout.Duration != 10*time.Second {
		t.Errorf("Parse = %+v, %v", cfg, err)
	}
}

// web_search needs every deployment of the model on a provider with a web
// search of its own.
func TestWebSearchProviders(t *testing.T) {
	cfg := `
backends:
  - {name: claude, provider: anthropic, base_url: https://api.anthropic.com}
  - {name: br, provider: bedrock, base_url: https://bedrock-runtime.us-east-1.amazonaws.com, region: us-east-1}
models:
  - {id: ok, web_search: true, deployments: [{backend: claude, model: claude-sonnet-4-5}]}
  - {id: bad, web_search: true, deployments: [{backend: claude, model: claude-sonnet-4-5}, {backend: br, model: x}]}
`
	_, err := Parse([]byte(cfg))
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 1 ||
		cerr.Problems[0] != "models[1].deployments[1].backend: web_search needs a provider with its own web search (anthropic, azure, gemini, openai, vertex), not bedrock" {
		t.Errorf("Parse: %v", err)
	}
}

// auto_cache reaches the model's routing, and is off unless set.
func TestAutoCacheRouted(t *testing.T) {
	cfg, err := Parse([]byte(`
backends:
  - {name: claude, provider: anthropic, base_url: https://api.anthropic.com}
models:
  - {id: cached, auto_cache: true, deployments: [{backend: claude, model: claude-sonnet-4-5}]}
  - {id: plain, deployments: [{backend: claude, model: claude-sonnet-4-5}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	models := cfg.Routing().Models
	if len(models) != 2 || !models[0].AutoCache || models[1].AutoCache {
		t.Errorf("routed models: %+v", models)
	}
}

// Aliases are names or prefixes before a final *; two models cannot
// claim one, and a model's alias is not its own id.
func TestModelAliases(t *testing.T) {
	const base = `
backends:
  - {name: openai, provider: openai, base_url: https://api.openai.com}
models:
`
	cfg, err := Parse([]byte(base + `  - {id: g, aliases: ["gpt-5-codex*", "codex", {name: house, listed: true}], deployments: [{backend: openai, model: gpt-4o}]}
  - {id: h, aliases: ["gpt-5*", "g"], deployments: [{backend: openai, model: gpt-4o}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Routing(); len(r.Models) != 2 || !slices.Equal(r.Models[0].Aliases, []string{"gpt-5-codex*", "codex", "house"}) ||
		!slices.Equal(r.Models[0].Listed, []string{"house"}) {
		t.Errorf("routing %+v", r.Models)
	}
	for _, tt := range []struct{ models, want string }{
		{`  - {id: g, aliases: ["gpt-*x*"], deployments: [{backend: openai, model: gpt-4o}]}`, `models[0].aliases[0]: "gpt-*x*": a * stands only at the end, after a prefix`},
		{`  - {id: g, aliases: ["*"], deployments: [{backend: openai, model: gpt-4o}]}`, `models[0].aliases[0]: must be a name, or a prefix before a final *, without control characters`},
		{`  - {id: g, aliases: [g], deployments: [{backend: openai, model: gpt-4o}]}`, `models[0].aliases[0]: "g" is the model's own id`},
		{"  - {id: g, aliases: [\"c*\"], deployments: [{backend: openai, model: gpt-4o}]}\n  - {id: h, aliases: [\"c*\"], deployments: [{backend: openai, model: gpt-4o}]}",
			`models[1].aliases[0]: "c*" is claimed by model "g" too: the gateway could not tell which one a client means`},
		{`  - {id: g, aliases: [{name: "c*", listed: true}], deployments: [{backend: openai, model: gpt-4o}]}`, `models[0].aliases[0]: "c*": a prefix names no model to list; list exact names only`},
		{`  - {id: g, aliases: [{listed: true}], deployments: [{backend: openai, model: gpt-4o}]}`, `models[0].aliases[0]: must be a name, or a prefix before a final *, without control characters`},
		{`  - {id: g, aliases: [{name: x, list: true}], deployments: [{backend: openai, model: gpt-4o}]}`, `models[0].aliases[0].list: unknown key; did you mean "listed"?`},
	} {
		_, err := Parse([]byte(base + tt.models + "\n"))
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0] != tt.want {
			t.Errorf("%s: %v, want %q", tt.models, err, tt.want)
		}
	}
}

// Capabilities and auto models are checked where they are written: the
// values each takes, an auto model without deployments of its own and
// over models that have them.
func TestModelCapabilitiesAndAuto(t *testing.T) {
	const base = `
backends:
  - {name: openai, provider: openai, base_url: https://api.openai.com}
models:
  - {id: a, deployments: [{backend: openai, model: gpt-4o}]}
`
	cfg, err := Parse([]byte(base + `  - {id: b, capabilities: {input: [text, image], tools: false, reasoning: false, max_output: 100, drop: [reasoning]}, deployments: [{backend: openai, model: gpt-4o}]}
  - {id: auto, auto: {candidates: [a, b]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Routing()
	if c := r.Models[1].Capabilities; !slices.Equal(c.Input, []string{"text", "image"}) || c.Tools == nil || *c.Tools || c.JSONSchema != nil ||
		c.MaxOutput != 100 || !slices.Equal(c.Drop, []string{"reasoning"}) {
		t.Errorf("capabilities %+v", c)
	}
	if a := r.Models[2].Auto; a == nil || !slices.Equal(a.Candidates, []string{"a", "b"}) || a.Prefer != "cheapest" || len(r.Models[2].Deployments) != 0 {
		t.Errorf("auto %+v", r.Models[2])
	}
	for _, tt := range []struct{ models, want string }{
		{`  - {id: b, capabilities: {input: [image]}, deployments: [{backend: openai, model: gpt-4o}]}`, `models[1].capabilities.input: must include text`},
		{`  - {id: b, capabilities: {input: [text, video]}, deployments: [{backend: openai, model: gpt-4o}]}`, `models[1].capabilities.input[1]: "video" is not one of text, image, audio, file`},
		{`  - {id: b, capabilities: {drop: [image]}, deployments: [{backend: openai, model: gpt-4o}]}`, `models[1].capabilities.drop[0]: "image" is not one of tools, json_schema, reasoning: a request's input is never dropped`},
		{`  - {id: b, capabilities: {max_output: -1}, deployments: [{backend: openai, model: gpt-4o}]}`, `models[1].capabilities.max_output: must not be negative`},
		{`  - {id: b}`, `models[1].deployments: needs at least one deployment`},
		{`  - {id: b, auto: {candidates: [a]}, deployments: [{backend: openai, model: gpt-4o}]}`, `models[1].deployments: an auto model has none: it routes to its candidates'`},
		{`  - {id: b, auto: {candidates: [a]}, fallback: {}}`, `models[1].fallback: an auto model has none: its candidates may`},
		{`  - {id: b, auto: {candidates: []}}`, `models[1].auto.candidates: needs at least one model`},
		{`  - {id: b, auto: {candidates: [a, c]}}`, `models[1].auto.candidates[1]: unknown model "c"`},
		{`  - {id: b, auto: {candidates: [a, a]}}`, `models[1].auto.candidates[1]: "a" is listed twice`},
		{"  - {id: b, auto: {candidates: [a]}}\n  - {id: c, auto: {candidates: [b]}}", `models[2].auto.candidates[0]: "b" is an auto model itself`},
		{`  - {id: b, auto: {candidates: [a], prefer: random}}`, `models[1].auto.prefer: "random" is not one of cheapest, fastest`},
	} {
		_, err := Parse([]byte(base + tt.models + "\n"))
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0] != tt.want {
			t.Errorf("%s: %v, want %q", tt.models, err, tt.want)
		}
	}
}
