package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"modelgate/extproc/extproctest"
)

// /metrics carries the OpenTelemetry GenAI semantic conventions' metrics
// under the names their Prometheus exporter gives them, labelled by
// operation, provider and configured model (never by key), beside the
// gateway's own.
func TestGenAIMetricsScraped(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	for _, body := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}],"stream":true}`,
		`{"model":"claude-sonnet","messages":[{"role":"user","content":"Hello!"}]}`,
		`{"model":"mock-error-400","messages":[{"role":"user","content":"Hello!"}]}`,
	} {
		a.call(t, "POST", "/chat/completions", a.APIKey, body)
	}
	a.call(t, "POST", "/embeddings", a.APIKey, `{"model":"text-embedding-3-small","input":"hi"}`)
	m := waitMetrics(t, a.Admin, func(m metrics) bool {
		return m.sum("gen_ai_client_operation_duration_seconds_count") >= 5
	})
	chat := `gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini"`
	for _, c := range []struct {
		name    string
		filters []string
		want    float64
	}{
		{"gen_ai_client_token_usage_count", []string{chat, `gen_ai_token_type="input"`}, 2},
		{"gen_ai_client_token_usage_sum", []string{chat, `gen_ai_token_type="output"`}, 377 + 100},
		{"gen_ai_client_operation_duration_seconds_count", []string{chat, `error_type=""`}, 2},
		{"gen_ai_client_operation_duration_seconds_count", []string{`gen_ai_request_model="mock-error-400"`, `error_type="provider_error"`}, 1},
		{"gen_ai_client_operation_duration_seconds_count", []string{`gen_ai_provider_name="anthropic"`, `gen_ai_request_model="claude-sonnet"`}, 1},
		{"gen_ai_client_token_usage_count", []string{`gen_ai_operation_name="embeddings"`, `gen_ai_token_type="input"`}, 1},
		{"gen_ai_server_time_to_first_token_seconds_count", []string{chat}, 1},
		{"gen_ai_server_time_per_output_token_seconds_count", []string{chat}, 1},
	} {
		if got := m.sum(c.name, c.filters...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.filters, got, c.want)
		}
	}
	for _, line := range m {
		if strings.HasPrefix(line, "gen_ai_") && (strings.Contains(line, "acct_") || strings.Contains(line, "key_")) {
			t.Errorf("a GenAI series names an account or key without account labels configured: %s", line)
		}
	}
}

// With observability.tracing, `modelgate dev` exports a span per request
// to the collector, a child of the request's traceparent, and flushes the
// last ones when it stops; Envoy's own tracing goes to the same collector
// in the generated bootstrap, which the stand-in runs.
func TestDevExportsTraces(t *testing.T) {
	recv := extproctest.StartOTLPReceiver(t)
	path := filepath.Join(t.TempDir(), "modelgate.yaml")
	conf := `backends:
  - {name: mock, provider: openai, base_url: "http://127.0.0.1:1"}
models:
  - {id: gpt-4o-mini, deployments: [{backend: mock, model: gpt-4o-mini}]}
observability:
  tracing: {otlp_endpoint: "http://` + recv.Addr + `", envoy: true, service_name: mg-test}
`
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	a, stop := launchDev(t, func(string) string { return "" }, io.Discard, "--data-dir", t.TempDir(), "--config", path)
	req, _ := http.NewRequest("POST", a.Gateway+"/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`))
	req.Header.Set("Authorization", "Bearer "+a.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	stop() // flushes the spans the batcher holds
	var span *tracepb.Span
	for _, s := range recv.Wait(t, 1) {
		if hex.EncodeToString(s.GetTraceId()) == "0af7651916cd43dd8448eb211c80319c" {
			span = s
		}
	}
	if span == nil || hex.EncodeToString(span.GetParentSpanId()) != "b7ad6b7169203331" || span.GetName() != "chat gpt-4o-mini" {
		t.Fatalf("span = %v", span)
	}
	if at := extproctest.Attributes(span); at["gen_ai.usage.output_tokens"].GetIntValue() != 377 || at["gen_ai.provider.name"].GetStringValue() != "openai" {
		t.Errorf("attributes = %v", at)
	}
}
