package config

import (
	"strings"
	"testing"
)

func TestObservability(t *testing.T) {
	cfg, err := Parse([]byte(`observability:
  request_log: {sample: 0.25}
  metrics: {account_labels: true}
  tracing: {otlp_endpoint: "http://collector:4317", sample: 0.5, envoy: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RequestLogSample() != 0.25 || cfg.TracingSample() != 0.5 || !cfg.Observability.Metrics.AccountLabels ||
		cfg.Observability.Tracing.ServiceName != "modelgate" {
		t.Errorf("observability = %+v", cfg.Observability)
	}
	defaults, _ := Parse([]byte("{}\n"))
	if defaults.RequestLogSample() != 1 || defaults.TracingSample() != 1 {
		t.Errorf("defaults: %v %v", defaults.RequestLogSample(), defaults.TracingSample())
	}
	for conf, want := range map[string]string{
		`{request_log: {sample: 0}}`:                                "observability.request_log.sample: must be above 0",
		`{tracing: {sample: 1.5}}`:                                  "observability.tracing.sample: must be above 0",
		`{tracing: {otlp_endpoint: "collector:4317"}}`:              "want http://host:port",
		`{tracing: {otlp_endpoint: "http://collector"}}`:            "name the port",
		`{tracing: {envoy: true}}`:                                  "observability.tracing.envoy: needs a plaintext otlp_endpoint",
		`{tracing: {otlp_endpoint: "https://c:4317", envoy: true}}`: "needs a plaintext otlp_endpoint",
		`{tracing: {otlp_endpoint: "http://c:4317/v1/traces"}}`:     "want http://host:port",
	} {
		if _, err := Parse([]byte("observability: " + conf + "\n")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", conf, err, want)
		}
	}
}

func TestUsageRetentionDays(t *testing.T) {
	cfg, err := Parse([]byte("storage: {usage_retention_days: 400}\n"))
	if err != nil || cfg.Storage.UsageRetentionDays != 400 {
		t.Fatalf("%+v %v", cfg, err)
	}
	if _, err := Parse([]byte("storage: {usage_retention_days: -1}\n")); err == nil || !strings.Contains(err.Error(), "storage.usage_retention_days") {
		t.Errorf("-1 days: %v", err)
	}
}
