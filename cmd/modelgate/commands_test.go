package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/authz"
	"modelgate/authz/admin"
	"modelgate/authz/sqlite"
)

var update = flag.Bool("update", false, "rewrite envoy/envoy.yaml from deploy/compose/modelgate.yaml")

func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, env{getenv: func(string) string { return "" }, stdout: &out, stderr: &errOut})
	return out.String(), errOut.String(), err
}

// envoy/envoy.yaml, which docker-compose runs, is exactly what
// `modelgate envoy-config` makes of the compose config.
func TestEnvoyYAMLIsGenerated(t *testing.T) {
	out, _, err := runCmd(t, "envoy-config", "--config", "../../deploy/compose/modelgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const golden = "../../envoy/envoy.yaml"
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != out {
		t.Errorf("%s is stale: run go test ./cmd/modelgate -run TestEnvoyYAMLIsGenerated -update", golden)
	}
}

// The envoy keys of the production bootstrap reach it, and validate
// reports a bootstrap Envoy would refuse.
func TestEnvoyProductionKeys(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`envoy:
  admin_listen: 10.0.0.2:19000
  max_requests_in_flight: 2500
  access_log: stderr
  use_remote_address: true
  xff_num_trusted_hops: 1
backends:
  - {name: up, provider: openai, base_url: "https://api.openai.com"}
`), 0o644)
	out, _, err := runCmd(t, "envoy-config", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"admin:\n  address:\n    socket_address:\n      address: 10.0.0.2\n      port_value: 19000\n",
		"      - max_connections: 2500\n        max_pending_requests: 2500\n        max_requests: 2500\n",
		"name: envoy.access_loggers.stderr", "use_remote_address: true\n", "xff_num_trusted_hops: 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("envoy-config output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "max_requests: 2500"); n != 2 {
		t.Errorf("%d clusters with max_requests 2500, want the ext_proc cluster and the backend", n)
	}
	os.WriteFile(cfg, []byte("envoy: {listen: '0.0.0.0:9901'}\n"), 0o644)
	if _, _, err := runCmd(t, "validate", "--config", cfg); err == nil || !strings.Contains(err.Error(), `admin address "127.0.0.1:9901": takes the port of the listener`) {
		t.Errorf("validate with the admin on the listener's port: %v", err)
	}
}

func TestValidate(t *testing.T) {
	out, _, err := runCmd(t, "validate", "--config", "../../deploy/compose/modelgate.yaml")
	if err != nil || !strings.Contains(out, "ok (4 backends, 4 models; needs Envoy 1.34 or later)") {
		t.Errorf("validate compose config: %q, %v", out, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("backends:\n  - {name: x, provider: nope, base_url: http://h}\nmodels:\n  - {id: m, deployments: [{backend: ghost, model: z}]}\n"), 0o644)
	_, _, err = runCmd(t, "validate", "--config", bad)
	for _, want := range []string{`backends[0].provider: "nope"`, `models[0].deployments[0].backend: unknown backend "ghost"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate bad config: error %v, want it to mention %s", err, want)
		}
	}
}

// A model with fallback needs Envoy 1.37: envoy-config and validate say
// so in their output, and refuse an older release when asked for one.
func TestEnvoyVersionForFallback(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`backends:
  - {name: a, provider: openai, base_url: "https://api.openai.com"}
  - {name: b, provider: anthropic, base_url: "https://api.anthropic.com"}
models:
  - {id: m, fallback: {}, deployments: [{backend: a, model: gpt-up}, {backend: b, model: claude-up, priority: 1}]}
`), 0o644)
	out, _, err := runCmd(t, "envoy-config", "--config", cfg)
	if err != nil || !strings.Contains(out, "# Needs Envoy 1.37 or later (its models with fallback do") {
		t.Errorf("envoy-config: %v, output starts %.300q", err, out)
	}
	if out, _, err := runCmd(t, "validate", "--config", cfg, "--envoy-version", "1.37.2"); err != nil || !strings.Contains(out, "needs Envoy 1.37 or later") {
		t.Errorf("validate for 1.37.2: %q, %v", out, err)
	}
	for _, cmd := range []string{"envoy-config", "validate"} {
		_, _, err := runCmd(t, cmd, "--config", cfg, "--envoy-version", "1.36")
		if err == nil || !strings.Contains(err.Error(), `fallback of model "m" needs Envoy 1.37 or later, not 1.36`) {
			t.Errorf("%s --envoy-version 1.36: %v", cmd, err)
		}
	}
	if _, _, err := runCmd(t, "validate", "--config", cfg, "--envoy-version", "1.33"); err == nil || !strings.Contains(err.Error(), "needs Envoy 1.34 or later") {
		t.Errorf("validate for 1.33: %v", err)
	}
	if _, _, err := runCmd(t, "validate", "--config", cfg, "--envoy-version", "latest"); err == nil || !strings.Contains(err.Error(), "want major.minor") {
		t.Errorf("validate for latest: %v", err)
	}
}

func TestKeysCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("storage: {sqlite_path: "+filepath.Join(dir, "k.db")+"}\n"), 0o644)
	secret, notice, err := runCmd(t, "keys", "create", "--config", cfg, "--account", "acme", "--models", "gpt-4o, gpt-4o-mini")
	secret = strings.TrimSpace(secret)
	if err != nil || !strings.HasPrefix(secret, authz.KeyPrefix) || strings.Contains(notice, secret) {
		t.Fatalf("keys create: %q %q %v; want only the secret on stdout", secret, notice, err)
	}
	list, _, err := runCmd(t, "keys", "list", "--config", cfg, "--account", "acme")
	if err != nil || !strings.Contains(list, authz.VisiblePrefix(secret)) || strings.Contains(list, secret) || !strings.Contains(list, "gpt-4o,gpt-4o-mini") {
		t.Fatalf("keys list = %q, %v", list, err)
	}
	for _, op := range []string{"disable", "enable", "disable", "revoke"} {
		out, _, err := runCmd(t, "keys", op, "--config", cfg, authz.VisiblePrefix(secret))
		if want := ": " + op + "d\n"; err != nil || !strings.HasSuffix(out, want) {
			t.Fatalf("keys %s = %q, %v; want it to end in %q", op, out, err, want)
		}
	}
	// Revoking is final: enabling the key again is refused.
	if _, _, err := runCmd(t, "keys", "enable", "--config", cfg, authz.VisiblePrefix(secret)); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("keys enable on a revoked key: %v, want a refusal", err)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k, err := store.KeyByHash(context.Background(), authz.HashKey(secret))
	if err != nil || !k.Disabled || k.RevokedAt == nil {
		t.Errorf("stored key = %+v, %v; want disabled and revoked", k, err)
	}
}

// keys create --guardrails adds optional guardrail rules to the key by
// name, each once; a name the admin would refuse is refused before
// anything is made.
func TestKeysCreateGuardrails(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("storage: {sqlite_path: "+filepath.Join(dir, "k.db")+"}\n"), 0o644)
	if _, _, err := runCmd(t, "keys", "create", "--config", cfg, "--account", "other", "--guardrails", "pii,"+strings.Repeat("x", 101)); err == nil ||
		!strings.Contains(err.Error(), "--guardrails: a guardrail rule name may have at most 100 characters") {
		t.Errorf("keys create with a 101-character rule name: %v, want a refusal", err)
	}
	secret, _, err := runCmd(t, "keys", "create", "--config", cfg, "--account", "acme", "--guardrails", "pii, tone,,pii")
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := runCmd(t, "keys", "list", "--config", cfg, "--account", "acme")
	if err != nil || !strings.Contains(list, "GUARDRAILS") || !strings.Contains(list, " pii,tone ") {
		t.Errorf("keys list = %q, %v; want the key's guardrails", list, err)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k, err := store.KeyByHash(context.Background(), authz.HashKey(strings.TrimSpace(secret)))
	if err != nil || strings.Join(k.Guardrails, "|") != "pii|tone" {
		t.Errorf("stored key = %+v, %v; want guardrails pii, tone", k, err)
	}
	if a, err := store.AccountByName(context.Background(), "other"); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("the refused create made its account: %+v, %v", a, err)
	}
}

// Changes made with the keys command are in the audit log, as the admin
// API's are: who (the command), what, and the key or account before and
// after, never the secret.
func TestKeysCommandsAudited(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("storage: {sqlite_path: "+filepath.Join(dir, "k.db")+"}\n"), 0o644)
	secret, _, err := runCmd(t, "keys", "create", "--config", cfg, "--account", "acme")
	if err != nil {
		t.Fatal(err)
	}
	secret = strings.TrimSpace(secret)
	for _, op := range []string{"disable", "enable", "revoke"} {
		if _, _, err := runCmd(t, "keys", op, "--config", cfg, authz.VisiblePrefix(secret)); err != nil {
			t.Fatal(err)
		}
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	entries, err := store.ListAudit(context.Background(), authz.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Action)
		if e.Actor != admin.CommandActor || strings.Contains(string(e.Before)+string(e.After), secret) {
			t.Errorf("entry %+v: want the command as actor and no secret", e)
		}
	}
	want := []string{"key.revoke", "key.update", "key.update", "key.create", "account.create"} // newest first
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("audit log %v, want %v", got, want)
	}
	if len(entries) == 5 && (!strings.Contains(string(entries[0].After), `"state":"revoked"`) || !strings.Contains(string(entries[2].After), `"disabled":true`)) {
		t.Errorf("revoke after %s, disable after %s", entries[0].After, entries[2].After)
	}
}

// `modelgate version` names the binary and its version.
func TestVersion(t *testing.T) {
	out, _, err := runCmd(t, "version")
	if err != nil || !strings.HasPrefix(out, "modelgate ") || len(strings.TrimSpace(out)) <= len("modelgate ") {
		t.Errorf("version = %q, %v", out, err)
	}
}
