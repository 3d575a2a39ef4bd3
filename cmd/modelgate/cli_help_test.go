package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every command answers --help (and -h, and `modelgate help CMD`) with its
// usage on stdout and success: what it does, its flags with their
// defaults, and an example.
func TestCLIHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"usage: modelgate <command>", "keys ", "Run 'modelgate <command> --help'"}},
		{[]string{"-h"}, []string{"usage: modelgate <command>"}},
		{[]string{"help"}, []string{"usage: modelgate <command>"}},
		{[]string{"keys", "--help"}, []string{"usage: modelgate keys <subcommand>", "create ", "revoke ", "example:\n  modelgate keys create --config"}},
		{[]string{"keys", "-h"}, []string{"usage: modelgate keys <subcommand>"}},
		{[]string{"keys", "help"}, []string{"usage: modelgate keys <subcommand>"}},
		{[]string{"keys", "create", "--help"}, []string{"usage: modelgate keys create --config F --account NAME",
			"prints\nits secret", "flags:\n", "--account NAME ", "--config F ", "--guardrails a,b ", "--models a,b ", "--name LABEL ",
			"example:\n  modelgate keys create --config modelgate.yaml --account acme"}},
		{[]string{"keys", "create", "--config", "c.yaml", "-h"}, []string{"usage: modelgate keys create"}},
		{[]string{"keys", "help", "create"}, []string{"usage: modelgate keys create"}},
		{[]string{"help", "keys", "create"}, []string{"usage: modelgate keys create"}},
		{[]string{"keys", "list", "--help"}, []string{"usage: modelgate keys list", "--account NAME", "example:"}},
		{[]string{"keys", "disable", "--help"}, []string{"usage: modelgate keys disable --config F KEY", "visible prefix", "example:"}},
		{[]string{"keys", "enable", "--help"}, []string{"usage: modelgate keys enable --config F KEY", "example:"}},
		{[]string{"keys", "revoke", "--help"}, []string{"usage: modelgate keys revoke --config F KEY", "for good", "example:"}},
		{[]string{"serve", "--help"}, []string{"usage: modelgate serve --config F", "--grpc-listen ADDR ", "--admin-listen ADDR ",
			"--sqlite-path PATH ", "server.grpc_listen", "example:\n  modelgate serve --config"}},
		{[]string{"help", "serve"}, []string{"usage: modelgate serve"}},
		{[]string{"dev", "--help"}, []string{"usage: modelgate dev", "--listen ADDR ", `(default "127.0.0.1:8080")`,
			`--data-dir DIR `, `(default ".modelgate")`, "dev-key", "MODELGATE_DEV_API_KEY", "example:\n  modelgate dev\n"}},
		{[]string{"validate", "--help"}, []string{"usage: modelgate validate --config F", "did you mean", "example:"}},
		{[]string{"envoy-config", "-help"}, []string{"usage: modelgate envoy-config --config F", "example:"}},
		{[]string{"version", "--help"}, []string{"usage: modelgate version", "example:"}},
	} {
		out, errOut, err := runCmd(t, tc.args...)
		if err != nil || errOut != "" {
			t.Errorf("%q: error %v, stderr %q; want success and nothing on stderr", tc.args, err, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: stdout does not contain %q:\n%s", tc.args, w, out)
			}
		}
	}
}

// A wrong flag, a missing flag or argument, or an unknown command fails
// (main exits 2) with the usage on stderr and nothing on stdout.
func TestCLIUsageErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("storage: {sqlite_path: "+filepath.Join(t.TempDir(), "k.db")+"}\n"), 0o644)
	for _, tc := range []struct {
		args       []string
		usage, err string
	}{
		{nil, "usage: modelgate <command>", "flag: help requested"},
		{[]string{"nope"}, "usage: modelgate <command>", `unknown command "nope"`},
		{[]string{"help", "nope"}, "usage: modelgate <command>", `unknown command "nope"`},
		{[]string{"keys"}, "usage: modelgate keys <subcommand>", "keys: a subcommand is required"},
		{[]string{"keys", "nope"}, "usage: modelgate keys <subcommand>", `keys: unknown subcommand "nope"`},
		{[]string{"keys", "create", "--bogus"}, "usage: modelgate keys create", "keys create: flag provided but not defined: -bogus"},
		{[]string{"keys", "create", "--account", "acme"}, "usage: modelgate keys create", "keys create: --config is required"},
		{[]string{"keys", "create", "--config", cfg}, "usage: modelgate keys create", "keys create: --account is required"},
		{[]string{"keys", "create", "--config", cfg, "--account", "acme", "extra"}, "usage: modelgate keys create", `keys create: unexpected argument "extra"`},
		{[]string{"keys", "list", "--config", cfg, "--name", "x"}, "usage: modelgate keys list", "flag provided but not defined: -name"},
		{[]string{"keys", "disable", "--config", cfg}, "usage: modelgate keys disable", "keys disable: name exactly one key id or prefix"},
		{[]string{"keys", "revoke", "--config", cfg, "a", "b"}, "usage: modelgate keys revoke", "keys revoke: name exactly one key id or prefix"},
		{[]string{"serve"}, "usage: modelgate serve", "serve: --config is required"},
		{[]string{"serve", "--config", cfg, "--grpc"}, "usage: modelgate serve", "flag provided but not defined: -grpc"},
		{[]string{"validate"}, "usage: modelgate validate", "validate: --config is required"},
		{[]string{"validate", "--config"}, "usage: modelgate validate", "flag needs an argument: -config"},
		{[]string{"envoy-config", cfg}, "usage: modelgate envoy-config", "envoy-config: --config is required"},
		{[]string{"dev", "--nope"}, "usage: modelgate dev", "dev: flag provided but not defined: -nope"},
		{[]string{"dev", "extra"}, "usage: modelgate dev", `dev: unexpected argument "extra"`},
		{[]string{"version", "--nope"}, "usage: modelgate version", "flag provided but not defined: -nope"},
	} {
		out, errOut, err := runCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
		}
		if out != "" || !strings.HasPrefix(errOut, tc.usage) {
			t.Errorf("%q: stdout %q, stderr %q; want the usage on stderr only", tc.args, out, errOut)
		}
	}
}

// validate reports every problem of a config at once, each with its
// location, wrong types and misspelt keys included.
func TestValidateReportsEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`
backends:
  - {name: a, provider: openai, base_url: "https://x"}
  - {name: b, provider: nope, base_url: "https://y", timeouts: {stream_idle: "10"}, api_key_evn: K}
models:
  - {id: m, context_window: big, deployments: [{backend: ghost, model: x}]}
`), 0o644)
	out, _, err := runCmd(t, "validate", "--config", path)
	want := path + `: 5 problem(s):
  backends[1].api_key_evn: unknown key; did you mean "api_key_env"?
  backends[1].timeouts.stream_idle: "10" is not a duration such as "10s"
  models[0].context_window: want an integer, got "big"
  backends[1].provider: "nope" is not one of `
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), `
  models[0].deployments[0].backend: unknown backend "ghost"`) || out != "" {
		t.Errorf("validate: stdout %q, error:\n%v\nwant it to start:\n%s", out, err, want)
	}
}
