package services

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/cmd/mockprovider/guards"
	"modelgate/extproc/guard"
)

// cloudGuards is a test server with the guard emulators under /guard, a
// Google OAuth2 token endpoint at /token (and one refusing every grant
// at /token-denied), and the last request the emulators got.
type cloudGuards struct {
	*httptest.Server
	// tokens counts the tokens /token issued.
	tokens atomic.Int32
	mu     sync.Mutex
	last   *http.Request
	body   []byte
}

// startCloudGuards starts a cloudGuards for the test.
func startCloudGuards(t *testing.T) *cloudGuards {
	t.Helper()
	g := &cloudGuards{}
	emulators := guards.Handler("/guard")
	mux := http.NewServeMux()
	mux.HandleFunc("/guard/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.last, g.body = r, body
		g.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		emulators.ServeHTTP(w, r)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		g.tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"ya29.test-token","expires_in":3600,"token_type":"Bearer"}`)) //nolint:errcheck // test server
	})
	mux.HandleFunc("POST /token-denied", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`, http.StatusBadRequest)
	})
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Close)
	return g
}

// request is the last request the emulators got, and its body.
func (g *cloudGuards) request() (*http.Request, []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last, g.body
}

// serviceAccountKey is a service account's private key, PEM-encoded.
var serviceAccountKey = sync.OnceValue(func() string {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
})

// googleServiceAccount is a service account's JSON key whose tokens tokenURL
// mints.
func googleServiceAccount(t *testing.T, tokenURL string) string {
	t.Helper()
	sa, err := json.Marshal(map[string]string{"type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": serviceAccountKey(),
		"client_email": "guard@p.iam.gserviceaccount.com", "token_uri": tokenURL})
	if err != nil {
		t.Fatal(err)
	}
	return string(sa)
}

// buildService is the service s specifies.
func buildService(t *testing.T, s Spec) guard.Service {
	t.Helper()
	svc, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// checkText is svc's verdict on text in phase, within 5s.
func checkText(t *testing.T, svc guard.Service, phase guard.Phase, text string) (guard.Verdict, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return svc.Check(ctx, guard.Input{Phase: phase, Text: text})
}

// testServiceFaults checks a service fails on each of the emulators' faults and
// passes the slow one: withFault is the service, its URL under
// /faults/{fault}. An error names the service and never the text.
func testServiceFaults(t *testing.T, withFault func(fault string) guard.Service) {
	const text = "a secret text about zebra-42"
	for _, fault := range []string{"429", "500", "malformed", "null"} {
		t.Run(fault, func(t *testing.T) {
			_, err := checkText(t, withFault(fault), guard.Request, text)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), `"svc"`) || strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q does not name the service or names the text", err)
			}
		})
	}
	t.Run("hang", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := withFault("hang").Check(ctx, guard.Input{Text: text}); err == nil {
			t.Error("no error")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v", d)
		}
	})
	t.Run("slow", func(t *testing.T) {
		v, err := checkText(t, withFault("slow"), guard.Request, text)
		if err != nil || !v.Flagged {
			t.Errorf("verdict %+v, %v; want flagged", v, err)
		}
	})
}
