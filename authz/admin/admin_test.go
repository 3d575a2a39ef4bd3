package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/internal/pgtest"
	"modelgate/authz/postgres"
	"modelgate/authz/sqlite"
)

// testToken is the admin token of every test handler.
const testToken = "test-admin-token-0123456789abcdef"

// testModels are the configured models of every test handler.
var testModels = []string{"gpt-4o-mini", "gpt-4o", "claude-sonnet"}

// forEachStore runs fn against a fresh SQLite store, and a PostgreSQL one
// in a schema of its own when MODELGATE_TEST_POSTGRES_URL is set.
func forEachStore(t *testing.T, fn func(t *testing.T, s authz.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "admin.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		u := pgtest.Schema(t) // skips when MODELGATE_TEST_POSTGRES_URL is unset
		t.Parallel()
		s, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
}

// harness is a Handler on a test server, with the Authenticator whose
// cache it invalidates.
type harness struct {
	srv   *httptest.Server
	store authz.Store
	auth  *authz.Authenticator
}

func newHarness(t *testing.T, store authz.Store, opts ...func(*Config)) *harness {
	t.Helper()
	// A long TTL: only invalidation can make changes visible in time.
	auth := authz.NewAuthenticator(store, authz.AuthenticatorConfig{TTL: 1 << 40})
	cfg := Config{TokenSHA256: sha256.Sum256([]byte(testToken)), Invalidate: auth.Invalidate, Models: testModels}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &harness{srv: srv, store: store, auth: auth}
}

// call sends an admin API request with the admin token and decodes the
// JSON answer into out (when not nil).
func (h *harness) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	return h.callWith(t, testToken, method, path, body, out)
}

func (h *harness) callWith(t *testing.T, token, method, path string, body, out any) int {
	t.Helper()
	var r io.Reader
	if s, ok := body.(string); ok {
		r = strings.NewReader(s)
	} else if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.srv.URL+path, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

// errorBody is the API's error shape.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func TestNewRequiresToken(t *testing.T) {
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New without a token hash succeeded")
	}
}

// Every API route, and paths that are no route, answer 401 without the
// admin token: nothing is revealed to a caller without it.
func TestAPIRequiresToken(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "admin.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Each call in a throttling window of its own: these wrong tokens test
	// the routes, not the throttle.
	var calls atomic.Int64
	h := newHarness(t, s, func(c *Config) {
		c.Now = func() time.Time { return time.Unix(0, 0).Add(time.Duration(calls.Add(1)) * failWindow) }
	})
	a, _ := s.CreateAccount(context.Background(), "acme")
	routes := []string{
		"GET /admin/v1/groups", "POST /admin/v1/groups", "GET /admin/v1/groups/g", "PATCH /admin/v1/groups/g",
		"GET /admin/v1/accounts", "POST /admin/v1/accounts", "GET /admin/v1/accounts/" + a.ID,
		"PATCH /admin/v1/accounts/" + a.ID, "GET /admin/v1/accounts/" + a.ID + "/keys",
		"POST /admin/v1/accounts/" + a.ID + "/keys", "GET /admin/v1/keys/k", "PATCH /admin/v1/keys/k",
		"POST /admin/v1/keys/k/revoke", "GET /admin/v1/usage", "GET /admin/v1/requests", "GET /admin/v1/requests/r",
		"GET /admin/v1/prices", "PUT /admin/v1/prices", "GET /admin/v1/audit", "POST /admin/v1/keys/k/rotate", "GET /admin/v1/nothing", "DELETE /admin/v1/accounts",
	}
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		for name, token := range map[string]string{"none": "", "wrong": "wrong-" + testToken, "prefix": testToken[:10]} {
			t.Run(route+"/"+name, func(t *testing.T) {
				var e errorBody
				if got := h.callWith(t, token, method, path, `{"name":"x"}`, &e); got != http.StatusUnauthorized {
					t.Errorf("status %d, want 401", got)
				}
				if e.Error.Type != "authentication_error" || e.Error.Message == "" {
					t.Errorf("error = %+v", e.Error)
				}
			})
		}
	}
	t.Run("schemes", func(t *testing.T) {
		for _, header := range []string{"Basic " + testToken, testToken, "Bearer"} {
			req, _ := http.NewRequest("GET", h.srv.URL+"/admin/v1/accounts", nil)
			req.Header.Set("Authorization", header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("Authorization %q: %d, WWW-Authenticate %q", header, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	})
	accts, err := s.ListAccounts(context.Background())
	if err != nil || len(accts) != 1 {
		t.Errorf("accounts after unauthenticated writes: %v %v", accts, err)
	}
}
