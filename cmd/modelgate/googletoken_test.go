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
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// A local token endpoint checks the JWT bearer grant the way Google's does.
func TestGoogleTokensAgainstLocalEndpoint(t *testing.T) {
	var key *rsa.PrivateKey
	var calls atomic.Int32
	var tokenURL string
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
		json.NewEncoder(w).Encode(map[string]any{"access_token": "ya29.token-" + string(rune('0'+calls.Load())), "expires_in": 3600, "token_type": "Bearer"})
	}))
	defer srv.Close()
	tokenURL = srv.URL + "/token"
	sa, k := testServiceAccount(t, tokenURL)
	key = k
	g, err := newGoogleTokens(sa, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	g.now = func() time.Time { return now }
	ctx := context.Background()
	first, err := g.Token(ctx)
	if err != nil || first != "ya29.token-1" {
		t.Fatalf("Token = %q, %v", first, err)
	}
	now = now.Add(50 * time.Minute)
	if again, _ := g.Token(ctx); again != first || calls.Load() != 1 {
		t.Errorf("within the lifetime: %q after %d calls, want the cached token", again, calls.Load())
	}
	now = now.Add(6 * time.Minute) // inside the 5-minute refresh margin
	if refreshed, _ := g.Token(ctx); refreshed != "ya29.token-2" || calls.Load() != 2 {
		t.Errorf("near expiry: %q after %d calls, want a refreshed token", refreshed, calls.Load())
	}
	bad, _ := newGoogleTokens(sa, srv.URL+"/other") // audience mismatch is refused
	bad.now = g.now
	if _, err := bad.Token(ctx); err == nil {
		t.Error("a refused exchange gave no error")
	}
}
