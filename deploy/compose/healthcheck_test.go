package compose_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// fakeAdmin answers path with status and everything else with 404, like an
// admin listener that is (or is not) ready.
func fakeAdmin(t *testing.T, path string, status int, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		if r.Method != http.MethodGet || r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		if status == http.StatusFound {
			http.Redirect(w, r, path+"/elsewhere", status)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(http.StatusText(status))) //nolint:errcheck // the test reads the status
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

type probeCase struct {
	name   string
	status int           // what the fake admin answers on the probed path; 0: nothing listens
	delay  time.Duration // before it answers
	ok     bool
}

var probeCases = []probeCase{
	{name: "ready", status: http.StatusOK, ok: true},
	{name: "draining", status: http.StatusServiceUnavailable},
	{name: "redirect", status: http.StatusFound},
	{name: "server error", status: http.StatusInternalServerError},
	{name: "nothing listens"},
	{name: "hangs", status: http.StatusOK, delay: 5 * time.Second},
}

// The modelgate services' healthcheck, run as compose writes it with the
// image's healthcheck binary: healthy only on a 200 from the admin port's
// /readyz, within the healthcheck's timeout.
func TestGatewayHealthcheck(t *testing.T) {
	bins := binaries(t)
	for _, g := range gateways(t, loadCompose(t)) {
		test := g.svc.Healthcheck.Test
		bin := bins[test[1]]
		if bin == "" || len(test) != 3 {
			t.Fatalf("%s: healthcheck %q does not run the image's healthcheck on a URL", g.name, test)
		}
		probe, err := url.Parse(test[2])
		if err != nil {
			t.Fatal(err)
		}
		timeout, err := time.ParseDuration(g.svc.Healthcheck.Timeout)
		if err != nil {
			t.Fatalf("%s: healthcheck timeout: %v", g.name, err)
		}
		for _, tc := range probeCases {
			t.Run(g.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				addr := closedAddr(t)
				if tc.status != 0 {
					addr = fakeAdmin(t, probe.Path, tc.status, tc.delay)
				}
				u := *probe
				u.Host = addr
				ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
				defer cancel()
				start := time.Now()
				out, err := exec.CommandContext(ctx, bin, u.String()).CombinedOutput()
				if took := time.Since(start); took >= timeout {
					t.Errorf("took %v; Docker kills a probe after %v", took, timeout)
				}
				if (err == nil) != tc.ok {
					t.Errorf("healthcheck %s: %v, %s; want ok=%v", u.String(), err, out, tc.ok)
				}
				if ee, isExit := err.(*exec.ExitError); isExit && ee.ExitCode() != 1 {
					t.Errorf("exit code %d; Docker wants 1 for unhealthy (2 is reserved)", ee.ExitCode())
				}
			})
		}
	}
}

// The Envoy services' healthcheck, the compose file's bash script run here
// against a fake admin listener on another port: healthy only on a 200
// from /ready.
func TestEnvoyHealthcheck(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash here to run the script with")
	}
	for _, p := range proxies(t, loadCompose(t)) {
		h := p.svc.Healthcheck
		if h == nil || len(h.Test) != 4 {
			t.Fatalf("%s: healthcheck %v, want CMD bash -c SCRIPT", p.name, h)
		}
		script := h.Test[3]
		m := envoyProbe.FindStringSubmatch(script)
		if m == nil {
			t.Fatalf("%s: healthcheck script %q asks no /dev/tcp/HOST/PORT", p.name, script)
		}
		timeout, err := time.ParseDuration(h.Timeout)
		if err != nil {
			t.Fatalf("%s: healthcheck timeout: %v", p.name, err)
		}
		for _, tc := range probeCases {
			if tc.delay > 0 {
				continue // bash's read has no timeout of its own: Docker's kills it
			}
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				addr := closedAddr(t)
				if tc.status != 0 {
					addr = fakeAdmin(t, m[3], tc.status, 0)
				}
				host, port, _ := net.SplitHostPort(addr)
				s := strings.Replace(script, "/dev/tcp/"+m[1]+"/"+m[2], "/dev/tcp/"+host+"/"+port, 1)
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				out, err := exec.CommandContext(ctx, "bash", "-c", s).CombinedOutput()
				if ctx.Err() != nil {
					t.Fatalf("the script did not finish within the healthcheck's %v", timeout)
				}
				if (err == nil) != tc.ok {
					t.Errorf("healthcheck against %s answering %d: %v, %s; want ok=%v", addr, tc.status, err, out, tc.ok)
				}
			})
		}
	}
}
