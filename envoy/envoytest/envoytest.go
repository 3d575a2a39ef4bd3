// Package envoytest starts what stands in front of the ext_proc server in a
// test: the Envoy stand-in (package standin) by default, or a real Envoy
// binary when MODELGATE_TEST_ENVOY names one. Both run the bootstrap the
// test generated with package envoy, so the same test checks the gateway
// behind either.
//
// A real Envoy cannot take the stand-in's test hooks (an injected clock,
// random numbers, zero back-offs, a response splitter): a test that needs
// them says so with RequireStandin or WithStandin and is skipped under a
// real Envoy; hooks that only make the stand-in faster, where Envoy's own
// behaviour passes the test as well, go in WithStandinTuning and are left
// out. The access log entries the stand-in hands over (WithAccessLog) are
// read from a real Envoy's stdout access log instead.
package envoytest

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"modelgate/envoy/standin"
)

// EnvVar names the Envoy binary the tests run; unset, they run the
// stand-in.
const EnvVar = "MODELGATE_TEST_ENVOY"

// Front is what stands in front of the ext_proc server in a test.
type Front interface {
	// URL is the listener's base URL, http://127.0.0.1:port, without a
	// trailing slash.
	URL() string
	// Real reports whether a real Envoy serves it.
	Real() bool
}

// Option adjusts Start.
type Option func(*settings)

type settings struct {
	accessLog func(standin.Entry)
	tuning    []standin.Option
	needs     []standin.Option
	whys      []string // why the test needs them
}

// WithAccessLog receives an Entry as each request ends: from the stand-in
// (standin.WithAccessLog), or parsed from the line a real Envoy's access
// log writes (see ParseAccessLogLine), which needs the bootstrap's access
// log on stdout or stderr with a JSON format (envoy.AccessLogStdout, the
// default).
func WithAccessLog(log func(standin.Entry)) Option {
	return func(s *settings) { s.accessLog = log }
}

// WithStandin passes options the test needs to the stand-in. A real Envoy
// cannot take them: under one Start skips the test, saying why. Without
// options it does nothing.
func WithStandin(why string, opts ...standin.Option) Option {
	return func(s *settings) {
		if len(opts) > 0 {
			s.needs = append(s.needs, opts...)
			s.whys = append(s.whys, why)
		}
	}
}

// WithStandinTuning passes options to the stand-in that only make it
// faster or quieter, where a real Envoy's own behaviour passes the test as
// well (standin.WithBackOff returning zero: Envoy waits its real 25-250ms).
// Under a real Envoy they are left out.
func WithStandinTuning(opts ...standin.Option) Option {
	return func(s *settings) { s.tuning = append(s.tuning, opts...) }
}

// RequireStandin skips the test under a real Envoy: it relies on
// something only the stand-in does (an injected clock, a response
// splitter, ...), which why names.
func RequireStandin(t testing.TB, why string) {
	t.Helper()
	if v := os.Getenv(EnvVar); v != "" {
		t.Skipf("needs the Envoy stand-in: %s; %s=%s runs a real Envoy, which cannot do that", why, EnvVar, v)
	}
}

// Start runs b in front of the test's servers until the test ends: the
// stand-in, or the real Envoy that MODELGATE_TEST_ENVOY names. The test
// fails if that is set to anything but an executable file.
func Start(t testing.TB, b *bootstrapv3.Bootstrap, opts ...Option) Front {
	t.Helper()
	var s settings
	for _, o := range opts {
		o(&s)
	}
	bin, err := binary(os.Getenv(EnvVar))
	if err != nil {
		t.Fatal(err)
	}
	if bin == "" {
		return startStandin(t, b, s)
	}
	if len(s.needs) > 0 {
		t.Skipf("needs the Envoy stand-in: %s; %s=%s runs a real Envoy, which cannot take stand-in options",
			strings.Join(s.whys, "; "), EnvVar, bin)
	}
	return startReal(t, bin, b, s)
}

// binary checks MODELGATE_TEST_ENVOY's value: "" without one, else the
// path of an executable file. A bare name is looked up in PATH; a relative
// path is refused, since go test runs each package in its own directory.
func binary(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%s=%s: %s; point it to an Envoy binary (.github/workflows/envoy.yml copies one out of the "+
			"envoyproxy/envoy image) or unset it to run the stand-in", EnvVar, v, fmt.Sprintf(format, args...))
	}
	path := v
	switch {
	case !strings.ContainsRune(v, '/') && !strings.ContainsRune(v, filepath.Separator):
		p, err := exec.LookPath(v)
		if err != nil {
			return fail("not found in PATH (%v)", err)
		}
		path = p
	case !filepath.IsAbs(v):
		return fail("a relative path, and go test runs each package in its own directory: give an absolute one")
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fail("%v", err)
	case fi.IsDir():
		return fail("a directory, not an executable file")
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
		return fail("not executable (mode %v)", fi.Mode().Perm())
	}
	return path, nil
}

type front struct {
	url  string
	real bool
}

func (f front) URL() string { return f.url }
func (f front) Real() bool  { return f.real }

func startStandin(t testing.TB, b *bootstrapv3.Bootstrap, s settings) Front {
	t.Helper()
	var opts []standin.Option
	if s.accessLog != nil {
		opts = append(opts, standin.WithAccessLog(s.accessLog))
	}
	opts = slices.Concat(opts, s.tuning, s.needs)
	proxy, err := standin.New(b, opts...)
	if err != nil {
		t.Fatalf("starting the stand-in: %v", err)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() { srv.Close(); proxy.Close() })
	return front{url: srv.URL}
}
