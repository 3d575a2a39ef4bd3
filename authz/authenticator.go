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
	// TTL is how long a principal (or a refusal) is served from memory;
	// zero means 10s. Changes made elsewhere (another replica, the CLI)
	// take effect within it; Invalidate makes local changes take effect at
	// once.
	TTL time.Duration
	// MaxEntries bounds the cache of valid principals; zero means 10000.
	// When it is full the oldest principal makes room.
	MaxEntries int
	// MaxNegativeEntries bounds, separately, the cache of refused keys
	// (unknown, revoked, expired, disabled); zero means 1000. When it is
	// full the oldest refusal makes room, so a flood of random keys churns
	// only this cache and never evicts a valid principal.
	MaxNegativeEntries int
	// StoreTimeout bounds each lookup of a key with its account and group
	// (and the last-used refresh that may follow); zero means 2s. A lookup
	// that fails or runs out of time gives an error wrapping ErrUnavailable.
	StoreTimeout time.Duration
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

// AuthStats are an Authenticator's cumulative counters, for export as
// metrics.
type AuthStats struct {
	// CacheHits counts well-formed keys answered from memory, accepted or
	// refused.
	CacheHits uint64
	// Lookups counts lookups in the store. Concurrent misses of one key
	// share a lookup, so this can be far below the number of misses.
	Lookups uint64
	// StoreErrors counts lookups that failed with ErrUnavailable, timeouts
	// included.
	StoreErrors uint64
	// StoreTimeouts counts lookups that ran past StoreTimeout.
	StoreTimeouts uint64
}

// PrincipalStore is what an Authenticator reads and writes of a store: a
// key by its hash with its account and group, and the key's last use.
// Every Store has it; it is the part of Keys, Accounts and Groups that
// authentication uses.
type PrincipalStore interface {
	// KeyByHash returns the key with that SHA-256, revoked or not, as
	// Keys.KeyByHash.
	KeyByHash(ctx context.Context, hash [32]byte) (Key, error)
	// AccountByID returns an account, as Accounts.AccountByID.
	AccountByID(ctx context.Context, id string) (Account, error)
	// GroupByID returns a group, as Groups.GroupByID.
	GroupByID(ctx context.Context, id string) (Group, error)
	// TouchKey records that a key was used at at, unless a later use is
	// already recorded, as Keys.TouchKey.
	TouchKey(ctx context.Context, id string, at time.Time) error
}

// Authenticator turns presented keys into principals, with a short-lived
// in-memory cache in front of the store.
//
// Concurrent misses of one key share a single lookup, which runs with the
// values but not the cancellation of the context that started it: a caller
// whose context ends stops waiting and returns the context's error, and the
// lookup goes on for the others, bounded by StoreTimeout.
type Authenticator struct {
	store PrincipalStore
	cfg   AuthenticatorConfig
	// errTimeout is returned when a lookup runs past StoreTimeout.
	errTimeout error

	mu       sync.Mutex
	pos      *fifoCache // valid principals
	neg      *fifoCache // refusals: ErrUnauthenticated, ErrDisabled
	inflight map[[32]byte]*flight
	// gen counts Invalidate calls; a lookup caches its result only if gen
	// has not moved since it started.
	gen   uint64
	stats AuthStats
}

// flight is one lookup in the store, shared by the callers that missed the
// cache for its key while it ran.
type flight struct {
	gen uint64
	// resolved is closed once p and err are set; done once the last-used
	// refresh that may follow is over too.
	resolved, done chan struct{}
	// timeout is closed when the lookup runs out of time.
	timeout <-chan struct{}
	p       *Principal
	err     error
}

// NewAuthenticator returns an Authenticator over store.
func NewAuthenticator(store PrincipalStore, cfg AuthenticatorConfig) *Authenticator {
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10000
	}
	if cfg.MaxNegativeEntries <= 0 {
		cfg.MaxNegativeEntries = 1000
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LastUsedInterval <= 0 {
		cfg.LastUsedInterval = time.Minute
	}
	return &Authenticator{
		store:      store,
		cfg:        cfg,
		errTimeout: fmt.Errorf("%w: no answer within %v", ErrUnavailable, cfg.StoreTimeout),
		pos:        newFIFOCache(cfg.MaxEntries),
		neg:        newFIFOCache(cfg.MaxNegativeEntries),
		inflight:   make(map[[32]byte]*flight),
	}
}

// Authenticate returns the principal for a presented key. Unknown,
// malformed, revoked and expired keys give ErrUnauthenticated; disabled keys
// and keys of disabled accounts give ErrDisabled; a store that fails or
// does not answer within StoreTimeout gives an error wrapping
// ErrUnavailable, which is not cached; a caller whose ctx ends first gets
// ctx.Err(). The returned principal is shared and must not be modified.
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (*Principal, error) {
	if !wellFormed(secret) {
		return nil, ErrUnauthenticated
	}
	hash := HashKey(secret)
	if p, hit, err := a.cached(hash, a.cfg.Now()); hit {
		return p, err
	}
	for attempt := 0; ; attempt++ {
		p, f, err := a.cachedOrJoin(ctx, hash, a.cfg.Now())
		if f == nil {
			return p, err
		}
		p, answered, err := a.wait(ctx, f)
		if !answered || attempt > 0 || errors.Is(err, ErrUnavailable) || !a.stale(f) {
			return p, err
		}
		// Invalidate ran while the lookup was under way, so it may have
		// read what was just changed (a key being revoked): look up once
		// more. Once, so that a stream of invalidations cannot hold a
		// request forever; the second answer was read after an
		// Invalidate that followed the first.
	}
}

// cached returns the cached answer for hash, if any: the fast path.
func (a *Authenticator) cached(hash [32]byte, now time.Time) (p *Principal, hit bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cachedLocked(hash, now)
}

func (a *Authenticator) cachedLocked(hash [32]byte, now time.Time) (p *Principal, hit bool, err error) {
	e := a.pos.get(hash, now)
	if e == nil {
		if e = a.neg.get(hash, now); e == nil {
			return nil, false, nil
		}
	}
	a.stats.CacheHits++
	return e.principal, true, e.err
}

// cachedOrJoin returns the cached answer for hash, or else the flight that
// looks it up, starting one if none is under way.
func (a *Authenticator) cachedOrJoin(ctx context.Context, hash [32]byte, now time.Time) (*Principal, *flight, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, hit, err := a.cachedLocked(hash, now); hit {
		return p, nil, err
	}
	if f, ok := a.inflight[hash]; ok && !closed(f.timeout) {
		return nil, f, nil
	}
	// No lookup under way, or only one past StoreTimeout, which may be
	// stuck in a store that ignores its context: start another.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.StoreTimeout)
	f := &flight{gen: a.gen, resolved: make(chan struct{}), done: make(chan struct{}), timeout: lctx.Done()}
	a.inflight[hash] = f
	a.stats.Lookups++
	go func() {
		defer cancel()
		a.run(lctx, f, hash, now)
	}()
	return nil, f, nil
}

// wait returns the flight's answer and true, or false and an error if ctx
// ends or the lookup runs out of time first.
func (a *Authenticator) wait(ctx context.Context, f *flight) (*Principal, bool, error) {
	select {
	case <-f.done:
		return f.p, true, f.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-f.timeout:
		// The store did not answer in time. The lookup itself may still
		// be blocked in a store that ignores its context; no caller waits
		// for it longer than StoreTimeout.
		select {
		case <-f.resolved:
			return f.p, true, f.err
		default:
			return nil, false, a.errTimeout
		}
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// stale reports whether Invalidate ran since f started.
func (a *Authenticator) stale(f *flight) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gen != f.gen
}

// run performs f's lookup and caches its answer, unless the store failed or
// Invalidate ran in the meantime.
func (a *Authenticator) run(ctx context.Context, f *flight, hash [32]byte, now time.Time) {
	defer close(f.done)
	k, p, expires, err := a.lookup(ctx, hash, now)
	timedOut := ctx.Err() != nil
	failed := errors.Is(err, ErrUnavailable)
	if failed && timedOut {
		err = a.errTimeout
	}
	f.p, f.err = p, err

	a.mu.Lock()
	if timedOut {
		a.stats.StoreTimeouts++
	}
	if failed {
		a.stats.StoreErrors++
	}
	if a.inflight[hash] == f {
		delete(a.inflight, hash)
	}
	if a.gen == f.gen && !failed {
		if until := now.Add(a.cfg.TTL); expires == nil || until.Before(*expires) {
			expires = &until // an expiring key leaves the cache when it expires
		}
		e := cacheEntry{principal: p, err: err, expires: *expires}
		if err == nil {
			a.neg.delete(hash)
			a.pos.put(hash, e)
		} else {
			a.pos.delete(hash)
			a.neg.put(hash, e)
		}
	}
	a.mu.Unlock()
	close(f.resolved)

	if p != nil {
		a.touch(ctx, k, now)
	}
}

// lookup reads the key, its account and group, and returns the key, the
// principal and the key's expiry. Store failures wrap ErrUnavailable.
func (a *Authenticator) lookup(ctx context.Context, hash [32]byte, now time.Time) (Key, *Principal, *time.Time, error) {
	k, err := a.store.KeyByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return Key{}, nil, nil, ErrUnauthenticated
	}
	if err != nil {
		return Key{}, nil, nil, fmt.Errorf("%w: looking up key: %w", ErrUnavailable, err)
	}
	// The store found the row by hash; comparing again in constant time
	// keeps a store with a lax index from ever matching a wrong key.
	if subtle.ConstantTimeCompare(k.Hash[:], hash[:]) != 1 || k.RevokedAt != nil ||
		(k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
		return Key{}, nil, nil, ErrUnauthenticated
	}
	acct, err := a.store.AccountByID(ctx, k.AccountID)
	if err != nil {
		return Key{}, nil, nil, fmt.Errorf("%w: looking up account of key %s: %w", ErrUnavailable, k.ID, err)
	}
	if k.Disabled || acct.Disabled {
		return Key{}, nil, k.ExpiresAt, ErrDisabled
	}
	var g Group
	if acct.GroupID != "" {
		if g, err = a.store.GroupByID(ctx, acct.GroupID); err != nil {
			return Key{}, nil, nil, fmt.Errorf("%w: looking up group of account %s: %w", ErrUnavailable, acct.ID, err)
		}
	}
	p := &Principal{KeyID: k.ID, KeyPrefix: k.Prefix, AccountID: acct.ID, AccountName: acct.Name,
		GroupID: g.ID, GroupName: g.Name, Limits: acct.Limits.Within(g.Limits),
		KeyBudget: k.Budget, AccountBudget: acct.Budget, GroupBudget: g.Budget}
	p.Models, p.NoModels = EffectiveModels(k.Models, acct.Models, g.Models)
	p.Guardrails = UnionNames(g.Guardrails, acct.Guardrails, k.Guardrails)
	return k, p, k.ExpiresAt, nil
}

// touch refreshes the key's last-used time when the stored one is older
// than the interval. It is best effort: failing to record a use must not
// fail the request, and the next cache miss tries again. ctx is the
// lookup's, so the refresh never outlasts StoreTimeout either.
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

// Invalidate drops every cached principal and refusal, so that changes to
// keys and accounts take effect at once. Call it after the change is
// stored. Lookups already under way then cache nothing, and the callers
// waiting on them look up once more rather than take an answer that may
// predate the change: a key revoked before Invalidate is refused to every
// call that starts after it and to every call still waiting for the store
// when it runs.
func (a *Authenticator) Invalidate() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	a.pos.clear()
	a.neg.clear()
	clear(a.inflight) // later misses start fresh lookups
}

// Stats returns the cumulative counters.
func (a *Authenticator) Stats() AuthStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}
