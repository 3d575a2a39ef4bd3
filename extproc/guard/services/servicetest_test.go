package services_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/cmd/mockprovider/guards"
	"modelgate/extproc/guard"
	"modelgate/extproc/guard/services"
)

// key is the API key the tests' services send; no error may show it.
const key = "sk-test-3f9c1e"

// contract is one service's case of the shared tests, run against its
// emulator (package guards).
type contract struct {
	// spec is the service but for its URL, which is the emulator's.
	spec services.Spec
	// path follows the emulators' base URL in the service's URL: "" but
	// for the generic contract, whose URL is the whole endpoint.
	path  string
	phase guard.Phase
	// spans: the service says where a match is.
	spans bool
	// credential is the header that carries the key; "" when the service
	// needs none.
	credential string
}

// emulators serves the guard emulators under /guard for the test and
// returns their base URL.
func emulators(t *testing.T) string {
	t.Helper()
	emulators := guards.Handler("/guard")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read whole first, as the mock provider does: net/http notices a
		// client gone (and ends the hang fault) only once the body is read.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		emulators.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/guard"
}

// service is c's service at base (with c.path), calling with client.
func (c contract) service(t *testing.T, base string, client *http.Client) guard.Service {
	t.Helper()
	s := c.spec
	s.URL, s.Client = base+c.path, client
	svc, err := services.New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return svc
}

// check has svc check text at phase within timeout.
func check(svc guard.Service, phase guard.Phase, text string, timeout time.Duration) (guard.Verdict, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return svc.Check(ctx, guard.Input{Phase: phase, Text: text})
}

// wantError fails unless err is an error naming the service and
// showing neither the text nor the key.
func wantError(t *testing.T, name string, err error, text string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatal("no error, want one")
	case !strings.Contains(err.Error(), `"`+name+`"`):
		t.Errorf("error %q does not name the service %q", err, name)
	case text != "" && strings.Contains(err.Error(), text), strings.Contains(err.Error(), key):
		t.Errorf("error %q shows the text or the key", err)
	}
}

// flagged are texts the emulators flag, each with "zebra-42" once: the
// second after non-ASCII text (2-, 3- and 4-byte code points and a
// combining accent), so byte and code point offsets differ.
var flagged = []struct{ name, text string }{
	{"flagged", "please zebra-42 now"},
	{"flagged after non-ASCII", "Grüße ☃ 😀 e\u0301 zebra-42!"},
}

// wantFlagged fails unless v flags text, with the one span of
// "zebra-42" if the service says where, else none.
func wantFlagged(t *testing.T, v guard.Verdict, text string, spans bool) {
	t.Helper()
	if !v.Flagged {
		t.Fatalf("verdict %+v on %q, want flagged", v, text)
	}
	if !spans {
		if v.Spans != nil {
			t.Errorf("spans %v on %q, want none", v.Spans, text)
		}
		return
	}
	if len(v.Spans) != 1 {
		t.Fatalf("spans %v on %q, want one", v.Spans, text)
	}
	if sp := v.Spans[0]; sp[0] < 0 || sp[0] >= sp[1] || sp[1] > len(text) || text[sp[0]:sp[1]] != "zebra-42" {
		t.Errorf("span %v of %q, want the bytes of zebra-42", sp, text)
	}
}

// testContract runs the cases every service passes against its
// emulator: clean and flagged texts, the faults, and a call without the
// key.
func testContract(t *testing.T, c contract) {
	base := emulators(t)
	svc := c.service(t, base, &http.Client{})
	t.Run("clean", func(t *testing.T) {
		v, err := check(svc, c.phase, "hello, world", 5*time.Second)
		if err != nil || v.Flagged || v.Spans != nil {
			t.Errorf("Check(clean) = %+v, %v; want not flagged, no spans", v, err)
		}
	})
	for _, f := range flagged {
		t.Run(f.name, func(t *testing.T) {
			v, err := check(svc, c.phase, f.text, 5*time.Second)
			if err != nil {
				t.Fatalf("Check(%q): %v", f.text, err)
			}
			wantFlagged(t, v, f.text, c.spans)
		})
	}
	for _, fault := range []string{"429", "500", "malformed", "null"} {
		t.Run(fault, func(t *testing.T) {
			faulty := c.service(t, base+"/faults/"+fault, &http.Client{})
			v, err := check(faulty, c.phase, flagged[0].text, 5*time.Second)
			wantError(t, c.spec.Name, err, flagged[0].text)
			if v.Flagged || v.Spans != nil {
				t.Errorf("verdict %+v beside the error, want none", v)
			}
		})
	}
	t.Run("hang", func(t *testing.T) {
		start := time.Now()
		_, err := check(c.service(t, base+"/faults/hang", &http.Client{}), c.phase, flagged[0].text, 100*time.Millisecond)
		wantError(t, c.spec.Name, err, flagged[0].text)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want the deadline's", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("returned after %v, want about the 100ms timeout", d)
		}
	})
	t.Run("slow", func(t *testing.T) {
		v, err := check(c.service(t, base+"/faults/slow", &http.Client{}), c.phase, flagged[1].text, 5*time.Second)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		wantFlagged(t, v, flagged[1].text, c.spans)
	})
	if c.credential != "" {
		t.Run("no credentials", func(t *testing.T) {
			lost := &http.Client{Transport: stripping{c.credential}}
			_, err := check(c.service(t, base, lost), c.phase, flagged[0].text, 5*time.Second)
			wantError(t, c.spec.Name, err, flagged[0].text)
			if !strings.Contains(err.Error(), "401") {
				t.Errorf("error %q, want the emulator's 401", err)
			}
		})
	}
}

// stripping is a transport that loses a header on the way: a service
// whose credentials do not arrive.
type stripping struct{ header string }

// RoundTrip sends r without the header.
func (s stripping) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del(s.header)
	return http.DefaultTransport.RoundTrip(r)
}

// call is one request a stub got.
type call struct {
	path, query string
	header      http.Header
	body        string
}

// stub is a service that answers every call with status and answer,
// and keeps the last call.
type stub struct {
	status int
	answer string
	mu     sync.Mutex
	last   call
}

// serve starts s for the test and returns its URL.
func (s *stub) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.last = call{r.Method + " " + r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.status)
		io.WriteString(w, s.answer) //nolint:errcheck // the client went away
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// called is the last call s got.
func (s *stub) called() call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// answerCase is one answer a service reads, and the verdict it makes of
// it, or the error (what it says) when wantErr is set.
type answerCase struct {
	name, answer string
	want         guard.Verdict
	wantErr      string
}

// testAnswers has spec's service (its URL a stub's, followed by
// spec.URL) check text at phase, the stub answering each case's answer
// with 200.
func testAnswers(t *testing.T, spec services.Spec, phase guard.Phase, text string, cases []answerCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			st := &stub{status: http.StatusOK, answer: tt.answer}
			s := spec
			s.URL = st.serve(t) + spec.URL
			svc, err := services.New(s)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			v, err := check(svc, phase, text, 5*time.Second)
			if tt.wantErr != "" {
				wantError(t, spec.Name, err, text)
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check(%q) on %s: %v", text, tt.answer, err)
			}
			if diff := cmp.Diff(tt.want, v); diff != "" {
				t.Errorf("verdict on %s (-want +got):\n%s", tt.answer, diff)
			}
		})
	}
}

// testRequest has spec's service (its URL a stub's, followed by
// spec.URL) check text at phase and returns the call the stub got.
func testRequest(t *testing.T, spec services.Spec, phase guard.Phase, text string) call {
	t.Helper()
	st := &stub{status: http.StatusOK, answer: "{}"}
	spec.URL = st.serve(t) + spec.URL
	svc, err := services.New(spec)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	check(svc, phase, text, 5*time.Second) //nolint:errcheck // the call is what is tested
	return st.called()
}
