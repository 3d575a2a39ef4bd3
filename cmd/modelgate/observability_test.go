package main

import (
	"strings"
	"testing"
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
