package main

import (
	"context"
	"encoding/hex"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"modelgate/extproc/config"
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

// Payload capture through `modelgate dev`: to a file, as JSON lines with
// the config's redaction applied; to the store, shown on the dashboard's
// request page.
func TestDevCapture(t *testing.T) {
	for _, to := range []string{"file", "store"} {
		t.Run(to, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "captures.jsonl")
			path := filepath.Join(dir, "modelgate.yaml")
			conf := `backends:
  - {name: mock, provider: openai, base_url: "http://127.0.0.1:1"}
models:
  - {id: gpt-4o-mini, deployments: [{backend: mock, model: gpt-4o-mini}]}
observability:
  capture:
    to: ` + to + `
    file: ` + file + `
    redact: {members: [content], patterns: ['\d{3}-\d{2}-\d{4}']}
`
			if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			a, stop := launchDev(t, func(string) string { return "" }, io.Discard, "--data-dir", t.TempDir(), "--config", path)
			status, _ := a.call(t, "POST", "/chat/completions", a.APIKey,
				`{"model":"gpt-4o-mini","user":"ssn 123-45-6789","messages":[{"role":"user","content":"my diary"}]}`)
			if status != 200 {
				t.Fatalf("chat: %d", status)
			}
			var captured string
			if to == "file" {
				stop()
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				captured = string(b)
				if lines := strings.Split(strings.TrimSpace(captured), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"status":200`) {
					t.Errorf("capture file: %s", captured)
				}
			} else {
				var id []string
				for deadline := time.Now().Add(10 * time.Second); id == nil; time.Sleep(20 * time.Millisecond) {
					// the ledger writes in batches
					id = regexp.MustCompile(`href="/admin/requests/([^"]+)"`).FindStringSubmatch(dashboardPage(t, a, "/admin/requests"))
					if id == nil && time.Now().After(deadline) {
						t.Fatal("no request on the requests page")
					}
				}
				captured = html.UnescapeString(dashboardPage(t, a, "/admin/requests/"+id[1]))
			}
			for _, leak := range []string{"my diary", "123-45-6789", "Hi there", a.APIKey} {
				if strings.Contains(captured, leak) {
					t.Errorf("the capture keeps %q", leak)
				}
			}
			if !strings.Contains(captured, `ssn [redacted]`) || !strings.Contains(captured, `[redacted]`) || !strings.Contains(captured, "total_tokens") {
				t.Errorf("capture: %.600s", captured)
			}
		})
	}
}

// dashboardPage signs in to dev's dashboard and returns a page's body.
func dashboardPage(t *testing.T, a devAddrs, path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	login, err := c.Get(a.Admin + "/admin/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(login.Body)
	login.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))
	if csrf == nil {
		t.Fatalf("no CSRF token on the sign-in page")
	}
	resp, err := c.PostForm(a.Admin+"/admin/login", url.Values{"csrf": {csrf[1]}, "token": {a.AdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(a.Admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// Tracing follows the standard OTEL_* variables when the config names no
// collector, and is off without them or with OTEL_SDK_DISABLED.
func TestTracerFromEnvironment(t *testing.T) {
	recv := extproctest.StartOTLPReceiver(t)
	cfg, err := config.Parse([]byte("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if tr, _, err := newTracer(context.Background(), cfg, getenv); err != nil || tr != nil {
		t.Fatalf("without a collector: %v %v", tr, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+recv.Addr) // the exporter reads it itself
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://" + recv.Addr
	env["OTEL_SDK_DISABLED"] = "true"
	if tr, _, err := newTracer(context.Background(), cfg, getenv); err != nil || tr != nil {
		t.Fatalf("OTEL_SDK_DISABLED: %v %v", tr, err)
	}
	delete(env, "OTEL_SDK_DISABLED")
	tr, stop, err := newTracer(context.Background(), cfg, getenv)
	if err != nil || tr == nil {
		t.Fatalf("with OTEL_EXPORTER_OTLP_ENDPOINT: %v %v", tr, err)
	}
	_, span := tr.Start(context.Background(), "probe")
	span.End()
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := recv.Wait(t, 1); spans[0].GetName() != "probe" {
		t.Errorf("spans = %v", spans)
	}
}
