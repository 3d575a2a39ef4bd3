package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func testServiceAccount(t *testing.T, tokenURI string) ([]byte, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	sa, _ := json.Marshal(map[string]string{"type": "service_account", "client_email": "gw@proj.iam.gserviceaccount.com",
		"private_key_id": "kid1", "private_key": string(pemKey), "token_uri": tokenURI})
	return sa, key
}

// A local token endpoint checks the JWT bearer grant the way Google's
// does; tokens are cached for their lifetime less five minutes.
func TestGoogleTokensAgainstLocalEndpoint(t *testing.T) {
	var key *rsa.PrivateKey
	var calls atomic.Int32
	var tokenURL string
	lifetime := int64(3600)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		r.ParseForm()
		if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			http.Error(w, "bad grant", 400)
			return
		}
		parts := strings.Split(r.Form.Get("assertion"), ".")
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, digest[:], sig) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		claimsJSON, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var claims map[string]any
		json.Unmarshal(claimsJSON, &claims)
		if claims["iss"] != "gw@proj.iam.gserviceaccount.com" || claims["aud"] != tokenURL || claims["scope"] != cloudPlatformScope {
			http.Error(w, "bad claims", 400)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("ya29.token-%d", calls.Load()), "expires_in": lifetime, "token_type": "Bearer"})
	}))
	defer srv.Close()
	tokenURL = srv.URL + "/token"
	sa, k := testServiceAccount(t, tokenURL)
	key = k
	ctx := context.Background()

	token, err := googleTokens(sa, "")
	if err != nil {
		t.Fatal(err)
	}
	first, err := token(ctx)
	if err != nil || first != "ya29.token-1" {
		t.Fatalf("token = %q, %v", first, err)
	}
	if again, _ := token(ctx); again != first || calls.Load() != 1 {
		t.Errorf("within the lifetime: %q after %d calls, want the cached token", again, calls.Load())
	}

	lifetime = 240 // inside the 5-minute refresh margin: never reused
	short, err := googleTokens(sa, tokenURL)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := short(ctx)
	b, _ := short(ctx)
	if a == b || calls.Load() != 3 {
		t.Errorf("near expiry: %q then %q after %d calls, want a fresh token each time", a, b, calls.Load())
	}

	bad, err := googleTokens(sa, srv.URL+"/other") // audience mismatch is refused
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad(ctx); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a refused exchange gave %v, want the status named", err)
	}
}

// Without a service account, Application Default Credentials are used:
// here the key file GOOGLE_APPLICATION_CREDENTIALS names.
func TestGoogleTokensApplicationDefault(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"access_token": "ya29.adc", "expires_in": 3600, "token_type": "Bearer"})
	}))
	defer srv.Close()
	sa, _ := testServiceAccount(t, srv.URL+"/token")
	path := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(path, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	token, err := googleTokens(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := token(context.Background()); got != "ya29.adc" || err != nil {
		t.Errorf("token = %q, %v", got, err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	if _, err := googleTokens(nil, ""); err == nil {
		t.Error("a missing credentials file gave no error")
	}
}
