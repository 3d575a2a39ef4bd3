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
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// serviceAccount is the part of a Google service-account key file used.
type serviceAccount struct {
	ClientEmail  string `json:"client_email"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	TokenURI     string `json:"token_uri"`
}

const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// googleTokens mints OAuth2 access tokens from a service account with the
// JWT bearer grant, caches them and refreshes them five minutes before
// they expire. It is safe for concurrent use; one refresh runs at a time.
type googleTokens struct {
	sa       serviceAccount
	key      *rsa.PrivateKey
	tokenURL string
	client   *http.Client
	now      func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
}

// newGoogleTokens parses a service-account key file. tokenURL overrides
// the file's token_uri when set.
func newGoogleTokens(keyJSON []byte, tokenURL string) (*googleTokens, error) {
	var sa serviceAccount
	if err := json.Unmarshal(keyJSON, &sa); err != nil {
		return nil, fmt.Errorf("reading the service account: %w", err)
	}
	block, _ := pem.Decode([]byte(sa.PrivateKey))
	if block == nil || sa.ClientEmail == "" {
		return nil, errors.New("the service account has no client_email or PEM private_key")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the service account key: %w", err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("the service account key is not RSA")
	}
	if tokenURL == "" {
		tokenURL = sa.TokenURI
	}
	if tokenURL == "" {
		tokenURL = "https://oauth2.googleapis.com/token"
	}
	return &googleTokens{sa: sa, key: key, tokenURL: tokenURL, client: &http.Client{Timeout: 10 * time.Second}, now: time.Now}, nil
}

// Token returns a valid access token, minting one when needed.
func (g *googleTokens) Token(ctx context.Context) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.token != "" && g.now().Before(g.expires.Add(-5*time.Minute)) {
		return g.token, nil
	}
	tok, ttl, err := g.mint(ctx)
	if err != nil {
		return "", err
	}
	g.token, g.expires = tok, g.now().Add(ttl)
	return tok, nil
}

func (g *googleTokens) mint(ctx context.Context) (string, time.Duration, error) {
	assertion, err := g.assertion()
	if err != nil {
		return "", 0, err
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := g.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("exchanging the service-account JWT: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.AccessToken == "" {
		return "", 0, fmt.Errorf("token endpoint answered %d", resp.StatusCode)
	}
	return out.AccessToken, time.Duration(out.ExpiresIn) * time.Second, nil
}

// assertion is the RS256-signed JWT of the JWT bearer grant.
func (g *googleTokens) assertion() (string, error) {
	now := g.now().Unix()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": g.sa.PrivateKeyID})
	claims, _ := json.Marshal(map[string]any{"iss": g.sa.ClientEmail, "scope": cloudPlatformScope, "aud": g.tokenURL,
		"iat": now, "exp": now + 3600})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, g.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}
