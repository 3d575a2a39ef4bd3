package authz

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"
)

// AuthenticatorConfig holds the Authenticator's knobs.
type AuthenticatorConfig struct {
	// TTL is how long a principal is served from memory; zero means 10s.
	// Changes made elsewhere (another replica, the CLI) take effect within
	// it; Invalidate makes local changes take effect at once.
	TTL time.Duration
	// MaxEntries bounds the cache; zero means 10000.
	MaxEntries int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Authenticator turns presented keys into principals, with a short-lived
// in-memory cache in front of the Store.
type Authenticator struct {
	store Store
	cfg   AuthenticatorConfig

	mu    sync.Mutex
	cache map[[32]byte]cacheEntry
}

// cacheEntry is a principal or an authentication error, until expires.
type cacheEntry struct {
	principal *Principal
	err       error
	expires   time.Time
}

// NewAuthenticator returns an Authenticator over store.
func NewAuthenticator(store Store, cfg AuthenticatorConfig) *Authenticator {
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Authenticator{store: store, cfg: cfg, cache: make(map[[32]byte]cacheEntry)}
}

// Authenticate returns the principal for a presented key. Unknown,
// malformed and revoked keys give ErrUnauthenticated; disabled keys and keys
// of disabled accounts give ErrDisabled. The returned principal is shared
// and must not be modified.
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (*Principal, error) {
	if !wellFormed(secret) {
		return nil, ErrUnauthenticated
	}
	hash := HashKey(secret)
	now := a.cfg.Now()
	if e, ok := a.cached(hash, now); ok {
		return e.principal, e.err
	}
	p, err := a.lookup(ctx, hash)
	if err != nil && !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, ErrDisabled) {
		return nil, err // store trouble is not cached
	}
	a.remember(hash, cacheEntry{principal: p, err: err, expires: now.Add(a.cfg.TTL)})
	return p, err
}

func (a *Authenticator) lookup(ctx context.Context, hash [32]byte) (*Principal, error) {
	k, err := a.store.KeyByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("looking up key: %w", err)
	}
	// The store found the row by hash; comparing again in constant time
	// keeps a store with a lax index from ever matching a wrong key.
	if subtle.ConstantTimeCompare(k.Hash[:], hash[:]) != 1 || k.RevokedAt != nil {
		return nil, ErrUnauthenticated
	}
	acct, err := a.store.AccountByID(ctx, k.AccountID)
	if err != nil {
		return nil, fmt.Errorf("looking up account of key %s: %w", k.ID, err)
	}
	if k.Disabled || acct.Disabled {
		return nil, ErrDisabled
	}
	return &Principal{KeyID: k.ID, KeyPrefix: k.Prefix, AccountID: acct.ID, AccountName: acct.Name, Models: k.Models}, nil
}

func (a *Authenticator) cached(hash [32]byte, now time.Time) (cacheEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.cache[hash]
	if !ok || !now.Before(e.expires) {
		return cacheEntry{}, false
	}
	return e, true
}

func (a *Authenticator) remember(hash [32]byte, e cacheEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= a.cfg.MaxEntries {
		a.evictExpired(e.expires.Add(-a.cfg.TTL))
	}
	if len(a.cache) >= a.cfg.MaxEntries {
		clear(a.cache) // a flood of distinct keys: start over rather than grow
	}
	a.cache[hash] = e
}

func (a *Authenticator) evictExpired(now time.Time) {
	for h, e := range a.cache {
		if !now.Before(e.expires) {
			delete(a.cache, h)
		}
	}
}

// Invalidate drops every cached principal, so that changes to keys and
// accounts take effect at once.
func (a *Authenticator) Invalidate() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.cache)
}
