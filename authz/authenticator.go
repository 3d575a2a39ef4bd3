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
	// LastUsedInterval is how stale a key's stored last-used time may get
	// before an authentication refreshes it; zero means a minute. Only a
	// cache miss compares and writes, so a key costs at most one write per
	// interval across all replicas (bar races), and its stored LastUsedAt
	// is never later than its true last use and at most
	// LastUsedInterval+TTL earlier.
	LastUsedInterval time.Duration
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
	if cfg.LastUsedInterval <= 0 {
		cfg.LastUsedInterval = time.Minute
	}
	return &Authenticator{store: store, cfg: cfg, cache: make(map[[32]byte]cacheEntry)}
}

// Authenticate returns the principal for a presented key. Unknown,
// malformed, revoked and expired keys give ErrUnauthenticated; disabled keys
// and keys of disabled accounts give ErrDisabled. The returned principal is shared
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
	p, expires, err := a.lookup(ctx, hash, now)
	if err != nil && !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, ErrDisabled) {
		return nil, err // store trouble is not cached
	}
	if until := now.Add(a.cfg.TTL); expires == nil || until.Before(*expires) {
		expires = &until // an expiring key leaves the cache when it expires
	}
	a.remember(hash, cacheEntry{principal: p, err: err, expires: *expires}, now)
	return p, err
}

// lookup reads the key, its account and group, and returns the principal
// with the key's expiry.
func (a *Authenticator) lookup(ctx context.Context, hash [32]byte, now time.Time) (*Principal, *time.Time, error) {
	k, err := a.store.KeyByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, nil, fmt.Errorf("looking up key: %w", err)
	}
	// The store found the row by hash; comparing again in constant time
	// keeps a store with a lax index from ever matching a wrong key.
	if subtle.ConstantTimeCompare(k.Hash[:], hash[:]) != 1 || k.RevokedAt != nil ||
		(k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
		return nil, nil, ErrUnauthenticated
	}
	acct, err := a.store.AccountByID(ctx, k.AccountID)
	if err != nil {
		return nil, nil, fmt.Errorf("looking up account of key %s: %w", k.ID, err)
	}
	if k.Disabled || acct.Disabled {
		return nil, k.ExpiresAt, ErrDisabled
	}
	var g Group
	if acct.GroupID != "" {
		if g, err = a.store.GroupByID(ctx, acct.GroupID); err != nil {
			return nil, nil, fmt.Errorf("looking up group of account %s: %w", acct.ID, err)
		}
	}
	a.touch(ctx, k, now)
	p := &Principal{KeyID: k.ID, KeyPrefix: k.Prefix, AccountID: acct.ID, AccountName: acct.Name,
		GroupID: g.ID, GroupName: g.Name, Limits: acct.Limits.Or(g.Limits)}
	p.Models, p.NoModels = EffectiveModels(k.Models, acct.Models, g.Models)
	return p, k.ExpiresAt, nil
}

// touch refreshes the key's last-used time when the stored one is older
// than the interval. It is best effort: failing to record a use must not
// fail the request, and the next cache miss tries again.
func (a *Authenticator) touch(ctx context.Context, k Key, now time.Time) {
	if k.LastUsedAt != nil && now.Sub(*k.LastUsedAt) < a.cfg.LastUsedInterval {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, touchTimeout)
	defer cancel()
	a.store.TouchKey(ctx, k.ID, now) //nolint:errcheck // best effort, see above
}

// touchTimeout bounds the delay a slow store adds to the request that
// happens to refresh a key's last-used time.
const touchTimeout = time.Second

func (a *Authenticator) cached(hash [32]byte, now time.Time) (cacheEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.cache[hash]
	if !ok || !now.Before(e.expires) {
		return cacheEntry{}, false
	}
	return e, true
}

func (a *Authenticator) remember(hash [32]byte, e cacheEntry, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= a.cfg.MaxEntries {
		a.evictExpired(now)
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
