package authz

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// KeyPrefix starts every generated key, so leaked keys are recognizable.
const KeyPrefix = "sk-mg-"

// visibleLen is how much of a secret is stored in the clear as its prefix.
const visibleLen = 12

// maxKeyLen is the longest secret Authenticate will look up.
const maxKeyLen = 256

// minKeyLen is the shortest secret Authenticate will look up; shorter
// strings cannot be keys and are rejected without touching the store.
const minKeyLen = 20

// GenerateKey returns a new secret: KeyPrefix and 43 characters of
// base64url encoding 32 random bytes.
func GenerateKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashKey returns the SHA-256 a secret is stored as.
func HashKey(secret string) [32]byte {
	if len(secret) <= maxKeyLen {
		// A stack copy: converting a string longer than 32 bytes to
		// []byte would allocate on every request.
		var buf [maxKeyLen]byte
		return sha256.Sum256(buf[:copy(buf[:], secret)])
	}
	return sha256.Sum256([]byte(secret))
}

// VisiblePrefix returns the part of a secret that may be shown.
func VisiblePrefix(secret string) string {
	return secret[:min(visibleLen, len(secret)/2)]
}

// wellFormed reports whether a presented string could be a key at all.
func wellFormed(secret string) bool {
	if len(secret) < minKeyLen || len(secret) > maxKeyLen {
		return false
	}
	return !strings.ContainsAny(secret, " \t\r\n")
}

// CreateKey generates a key for an account, stores its hash and returns the
// secret, which is never available again.
func CreateKey(ctx context.Context, s Keys, accountID, name string, models []string) (string, Key, error) {
	return IssueKey(ctx, s, Key{AccountID: accountID, Name: name, Models: models})
}

// IssueKey generates a secret for k (its account, name, models,
// guardrails, disabled flag, expiry and budget), stores its hash and
// prefix and returns the secret, which is never available again.
func IssueKey(ctx context.Context, s Keys, k Key) (string, Key, error) {
	secret, err := GenerateKey()
	if err != nil {
		return "", Key{}, err
	}
	k, err = storeKey(ctx, s, k, secret)
	return secret, k, err
}

// RegisterKey stores a secret chosen elsewhere (for scripts and dev mode).
// It must be at least 20 characters long.
func RegisterKey(ctx context.Context, s Keys, accountID, name, secret string, models []string) (Key, error) {
	return storeKey(ctx, s, Key{AccountID: accountID, Name: name, Models: models}, secret)
}

func storeKey(ctx context.Context, s Keys, k Key, secret string) (Key, error) {
	if !wellFormed(secret) {
		return Key{}, fmt.Errorf("a key must be %d to %d characters without spaces", minKeyLen, maxKeyLen)
	}
	k.Prefix, k.Hash = VisiblePrefix(secret), HashKey(secret)
	k, err := s.CreateKey(ctx, k)
	if err != nil {
		return Key{}, fmt.Errorf("storing key: %w", err)
	}
	return k, nil
}
