package envoytest_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"modelgate/envoy"
	"modelgate/envoy/envoytest"
	"modelgate/envoy/routing"
	"modelgate/envoy/standin"
	"modelgate/extproc/extproctest"
)

// catchAllBootstrap is a small generated bootstrap: one backend and the
// ext_proc server extproctest.Noop, which picks no backend, so every
// request ends at the catch-all route.
func catchAllBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(s, extproctest.Noop{})
	go s.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(s.Stop)
	b, err := envoy.Bootstrap(envoy.Config{Listen: "127.0.0.1:0", ExtProcAddress: l.Addr().String(),
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", BaseURL: "http://127.0.0.1:9"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// notFound is the catch-all route's status and body in b.
func notFound(t *testing.T, b *bootstrapv3.Bootstrap) (*routev3.Route, string) {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if r.GetMatch().GetPrefix() == "/" && r.GetDirectResponse().GetStatus() == http.StatusNotFound {
				return r, r.GetDirectResponse().GetBody().GetInlineString()
			}
		}
	}
	t.Fatal("the bootstrap has no catch-all 404 route")
	return nil, ""
}

// checkCatchAll asks front for a path no route serves: the answer is the
// bootstrap's OpenAI-shaped 404, and the access log entry says so.
func checkCatchAll(t *testing.T, b *bootstrapv3.Bootstrap, front envoytest.Front, entries <-chan standin.Entry) {
	t.Helper()
	route, want := notFound(t, b)
	if strings.HasSuffix(front.URL(), "/") || !strings.HasPrefix(front.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q: want http://127.0.0.1:port", front.URL())
	}
	resp, err := http.Get(front.URL() + "/no/such/path")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNotFound || string(body) != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("got %d %q (%s), want 404 %s (application/json)", resp.StatusCode, body, resp.Header.Get("Content-Type"), want)
	}
	var e struct {
		Error struct {
			Message, Type string
			Param, Code   *string
		}
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" ||
		e.Error.Param != nil || e.Error.Code == nil {
		t.Errorf("the 404's body %s is not an OpenAI error (%v)", body, err)
	}
	select {
	case got := <-entries:
		if got.Status != http.StatusNotFound || got.Route != route.GetName() || got.Method != http.MethodGet || got.Line == "" {
			t.Errorf("access log entry %+v: want GET, 404 on route %s, with its line", got, route.GetName())
		}
		parsed, err := envoytest.ParseAccessLogLine(envoytest.AccessLogFormat(b), []byte(got.Line))
		if err != nil {
			t.Fatal(err)
		}
		if parsed.Status != got.Status || parsed.Route != got.Route || parsed.Flags != got.Flags ||
			parsed.BytesSent != got.BytesSent || parsed.Method != got.Method || parsed.ClientAddress != got.ClientAddress {
			t.Errorf("the line %s reads as %+v; the entry is %+v", got.Line, parsed, got)
		}
	case <-time.After(10 * time.Second):
		t.Error("no access log entry")
	}
}

// The catch-all through whatever MODELGATE_TEST_ENVOY selects: the
// stand-in here.
func TestCatchAll(t *testing.T) {
	b := catchAllBootstrap(t)
	entries := make(chan standin.Entry, 16)
	front := envoytest.Start(t, b, envoytest.WithAccessLog(func(e standin.Entry) { entries <- e }))
	if front.Real() != (os.Getenv(envoytest.EnvVar) != "") {
		t.Errorf("Real() = %v with %s=%q", front.Real(), envoytest.EnvVar, os.Getenv(envoytest.EnvVar))
	}
	checkCatchAll(t, b, front, entries)
}

// The real-Envoy leg: a real Envoy runs a generated bootstrap and answers
// with its catch-all 404.
func TestRealEnvoy(t *testing.T) {
	if os.Getenv(envoytest.EnvVar) == "" {
		t.Skip("MODELGATE_TEST_ENVOY is not set: the real-Envoy leg runs where an Envoy binary exists (see .github/workflows/envoy.yml)")
	}
	b := catchAllBootstrap(t)
	entries := make(chan standin.Entry, 16)
	front := envoytest.Start(t, b, envoytest.WithAccessLog(func(e standin.Entry) { entries <- e }))
	if !front.Real() {
		t.Fatal("Real() = false")
	}
	checkCatchAll(t, b, front, entries)
}

// Start's real-Envoy path with a fake Envoy (this test binary running the
// stand-in as a process of its own): command line, bootstrap file, admin
// address file, readiness, the listener's port from the admin interface,
// the access log read from stdout, and SIGTERM at the end.
func TestStartRealPath(t *testing.T) {
	t.Setenv(envoytest.EnvVar, fakeEnvoyBinary(t, "serve"))
	b := catchAllBootstrap(t)
	entries := make(chan standin.Entry, 16)
	front := envoytest.Start(t, b, envoytest.WithAccessLog(func(e standin.Entry) { entries <- e }),
		envoytest.WithStandinTuning(standin.WithBackOff(func(time.Duration) time.Duration { return 0 })))
	if !front.Real() {
		t.Fatal("Real() = false")
	}
	checkCatchAll(t, b, front, entries)

	// Stand-in options a test needs skip it; so does RequireStandin.
	var sub *testing.T
	t.Run("needs the stand-in", func(t *testing.T) {
		sub = t
		envoytest.Start(t, b, envoytest.WithStandin("a test hook", standin.WithRandom(func() uint64 { return 0 })))
		t.Error("Start did not skip")
	})
	if !sub.Skipped() {
		t.Error("Start with stand-in options under a real Envoy: not skipped")
	}
	t.Run("RequireStandin", func(t *testing.T) {
		sub = t
		envoytest.RequireStandin(t, "a test hook")
		t.Error("RequireStandin did not skip")
	})
	if !sub.Skipped() {
		t.Error("RequireStandin under a real Envoy: not skipped")
	}
}

// Under the stand-in neither skips, and the options reach it.
func TestStandinOptions(t *testing.T) {
	t.Setenv(envoytest.EnvVar, "")
	envoytest.RequireStandin(t, "a test hook")
	b := catchAllBootstrap(t)
	var tuned, needed bool
	entries := make(chan standin.Entry, 16)
	front := envoytest.Start(t, b, envoytest.WithAccessLog(func(e standin.Entry) { entries <- e }),
		envoytest.WithStandinTuning(func(*standin.Proxy) { tuned = true }),
		envoytest.WithStandin("a test hook", func(*standin.Proxy) { needed = true }))
	if front.Real() || !tuned || !needed {
		t.Errorf("Real() %v, tuning applied %v, needed options applied %v", front.Real(), tuned, needed)
	}
	checkCatchAll(t, b, front, entries)
}

// A line as Envoy writes it for the generated json_format reads as the
// Entry the stand-in would hand over.
func TestParseAccessLogLine(t *testing.T) {
	b, err := envoy.Bootstrap(envoy.Config{Listen: "127.0.0.1:0", ExtProcAddress: "127.0.0.1:50051",
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", BaseURL: "http://127.0.0.1:9"}}}})
	if err != nil {
		t.Fatal(err)
	}
	format := envoytest.AccessLogFormat(b)
	if len(format) != len(envoy.AccessLogFields)+len(envoy.UsageKeys) {
		t.Fatalf("format %v: want every AccessLogFields and UsageKeys field", format)
	}
	line := `{"start_time":"2026-03-01T12:00:00.123Z","method":"POST","path":"/v1/chat/completions","status":200,` +
		`"response_code_details":"via_upstream","response_flags":"-","duration_ms":42,"bytes_received":68,"bytes_sent":730,` +
		`"request_id":"4a1c","client_address":"127.0.0.1","user_agent":"curl/8","route":"main","upstream_cluster":"main",` +
		`"model":"gpt-4o","backend":"main","provider":"openai","account_id":"acct_1","prompt_tokens":8,` +
		`"completion_tokens":377,"total_tokens":385}`
	got, err := envoytest.ParseAccessLogLine(format, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := standin.Entry{
		Method: "POST", Status: 200, Details: "via_upstream", Route: "main", Cluster: "main",
		Metadata: map[string]map[string]any{"io.modelgate": {"model": "gpt-4o", "backend": "main", "provider": "openai",
			"account_id": "acct_1", "prompt_tokens": 8.0, "completion_tokens": 377.0, "total_tokens": 385.0}},
		StartTime: time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC), Duration: 42 * time.Millisecond,
		BytesReceived: 68, BytesSent: 730, ClientAddress: "127.0.0.1", Line: line,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	// A local reply: flags and details, no route or cluster, no metadata.
	line = `{"start_time":"2026-03-01T12:00:01.000Z","method":"POST","path":"/v1/chat/completions","status":504,` +
		`"response_code_details":"upstream_per_try_timeout","response_flags":"UT,URX","duration_ms":2001,"bytes_received":68,` +
		`"bytes_sent":120,"request_id":null,"client_address":"127.0.0.1","user_agent":null,"route":null,"upstream_cluster":null,` +
		`"model":null,"backend":null,"provider":null,"account_id":null,"prompt_tokens":null,"completion_tokens":null,"total_tokens":null}`
	got, err = envoytest.ParseAccessLogLine(format, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != 504 || got.Flags != "UT,URX" || got.Details != "upstream_per_try_timeout" || got.Route != "" ||
		got.Cluster != "" || got.Metadata != nil || got.Duration != 2001*time.Millisecond {
		t.Errorf("local reply: %+v", got)
	}

	for _, bad := range []string{`not json`, `{"status":"two hundred"}`, `{"start_time":"yesterday"}`} {
		if _, err := envoytest.ParseAccessLogLine(format, []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// helperVar makes TestHelperStart run: it is run in a child process by
// the tests of failures, which fail the test they happen in.
const helperVar = "MODELGATE_ENVOYTEST_HELPER"

func TestHelperStart(t *testing.T) {
	if os.Getenv(helperVar) == "" {
		t.Skip("run by TestStartFailures in a child process")
	}
	envoytest.Start(t, catchAllBootstrap(t))
	t.Log("Start returned")
}

// runHelper runs TestHelperStart with MODELGATE_TEST_ENVOY=envoyPath and
// returns its output; the child must fail.
func runHelper(t *testing.T, envoyPath string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStart$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperVar+"=1", envoytest.EnvVar+"="+envoyPath)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL: TestHelperStart") || strings.Contains(string(out), "Start returned") {
		t.Fatalf("%s=%s: the test did not fail (%v):\n%s", envoytest.EnvVar, envoyPath, err, out)
	}
	return string(out)
}

// MODELGATE_TEST_ENVOY set to anything but an Envoy that starts fails the
// test, clearly, and never falls back to the stand-in.
func TestStartFailures(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "envoy")
	if err := os.WriteFile(notExec, []byte("not a binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		want       []string
	}{
		{"not executable", notExec, []string{envoytest.EnvVar + "=" + notExec, "not executable", "unset it to run the stand-in"}},
		{"missing", filepath.Join(dir, "nothing"), []string{envoytest.EnvVar + "=", "no such file"}},
		{"directory", dir, []string{"a directory"}},
		{"relative", "bin/envoy", []string{"relative path"}},
		{"fails to start", fakeEnvoyBinary(t, "fail"), []string{"did not get ready", "exited", "[critical] fake envoy: refusing to start"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := runHelper(t, c.path)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the failure does not say %q:\n%s", w, out)
				}
			}
		})
	}
}
