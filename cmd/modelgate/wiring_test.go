package main

import (
	"strings"
	"testing"
	"time"

	"modelgate/extproc"
	"modelgate/extproc/config"
	"modelgate/extproc/guard"

	"go.uber.org/zap"
)

// The config file's defaults are written in extproc/config; the ext_proc
// server keeps zero-value fallbacks of its own for callers that set
// nothing (its tests, extproctest). They must be the same numbers, or the
// gateway would behave differently run from a file than embedded.
func TestWiringDefaultsAgree(t *testing.T) {
	for _, tc := range []struct {
		name        string
		config, srv any
	}{
		{"max request body", int64(config.DefaultMaxRequestBodyBytes), int64(extproc.DefaultMaxRequestBodyBytes)},
		{"max audio", int64(config.DefaultMaxAudioBytes), int64(extproc.DefaultMaxAudioBodyBytes)},
		{"image URL TTL", time.Duration(config.DefaultImageURLTTL), time.Duration(extproc.DefaultImageURLTTL)},
		{"response retention", time.Duration(config.DefaultResponseRetention), time.Duration(extproc.DefaultResponseRetention)},
		{"currency", config.DefaultCurrency, extproc.DefaultCurrency},
	} {
		if tc.config != tc.srv {
			t.Errorf("%s: config's default %v, the server's %v", tc.name, tc.config, tc.srv)
		}
	}
}

// A guard service's credential that is not in the environment refuses
// the start, naming its variable; one that is set is read.
func TestGuardServiceCredentials(t *testing.T) {
	cfg, err := config.Parse([]byte(`backends:
  - {name: openai, provider: openai, base_url: https://api.openai.com, api_key_env: OPENAI_KEY}
models:
  - {id: m, deployments: [{backend: openai, model: gpt-4o}]}
guardrails:
  services:
    - {name: mod, type: openai_moderation, url: "https://api.openai.com", api_key_env: MOD_KEY, price_per_call: "0.002"}
  rules:
    - {name: r, phase: request, service: mod, action: block, failure: open}
`))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_KEY": "sk-upstream"}
	_, err = extprocConfig(cfg, func(k string) string { return env[k] }, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "MOD_KEY") || !strings.Contains(err.Error(), `"mod"`) {
		t.Errorf("missing credential: %v", err)
	}
	env["MOD_KEY"] = "sk-moderation"
	out, err := extprocConfig(cfg, func(k string) string { return env[k] }, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r := out.Guardrails.Rules[0]
	if r.Backend == nil || r.Backend.Type != "openai_moderation" || r.Backend.Price != 2_000_000 || r.Failure != guard.Open || r.Check != "openai_moderation" {
		t.Errorf("rule %+v, backend %+v", r, r.Backend)
	}
}
