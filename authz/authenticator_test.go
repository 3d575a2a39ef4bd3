package authz_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/sqlite"
)

type fixture struct {
	store  *sqlite.Store
	auth   *authz.Authenticator
	now    time.Time
	acct   authz.Account
	secret string
	key    authz.Key
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{store: s, now: time.Unix(1_700_000_000, 0)}
	f.auth = authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: time.Minute, Now: func() time.Time { return f.now }})
	if f.acct, err = s.CreateAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if f.secret, f.key, err = authz.CreateKey(ctx, s, f.acct.ID, "k", []string{"gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		prepare func(f *fixture) string
		wantErr error
	}{
		{"valid", func(f *fixture) string { return f.secret }, nil},
		{"unknown", func(f *fixture) string { k, _ := authz.GenerateKey(); return k }, authz.ErrUnauthenticated},
		{"malformed", func(f *fixture) string { return "short" }, authz.ErrUnauthenticated},
		{"revoked", func(f *fixture) string { f.store.RevokeKey(ctx, f.key.ID); return f.secret }, authz.ErrUnauthenticated},
		{"disabled key", func(f *fixture) string { f.store.SetKeyDisabled(ctx, f.key.ID, true); return f.secret }, authz.ErrDisabled},
		{"disabled account", func(f *fixture) string { f.store.SetAccountDisabled(ctx, f.acct.ID, true); return f.secret }, authz.ErrDisabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p, err := f.auth.Authenticate(ctx, tt.prepare(f))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Authenticate error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if p.KeyID != f.key.ID || p.AccountID != f.acct.ID || !p.Allows("gpt-4o") || p.Allows("gpt-5") {
				t.Errorf("principal = %+v, want key %s of %s allowed only gpt-4o", p, f.key.ID, f.acct.ID)
			}
		})
	}
}

func TestAuthenticateCachesUntilTTLOrInvalidate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.auth.Authenticate(ctx, f.secret); err != nil {
		t.Fatal(err)
	}
	if err := f.store.RevokeKey(ctx, f.key.ID); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(30 * time.Second)
	if _, err := f.auth.Authenticate(ctx, f.secret); err != nil {
		t.Errorf("within TTL: error = %v, want the cached principal", err)
	}
	f.now = f.now.Add(31 * time.Second)
	if _, err := f.auth.Authenticate(ctx, f.secret); !errors.Is(err, authz.ErrUnauthenticated) {
		t.Errorf("after TTL: error = %v, want ErrUnauthenticated", err)
	}

	g := newFixture(t)
	if _, err := g.auth.Authenticate(ctx, g.secret); err != nil {
		t.Fatal(err)
	}
	g.store.SetKeyDisabled(ctx, g.key.ID, true)
	g.auth.Invalidate()
	if _, err := g.auth.Authenticate(ctx, g.secret); !errors.Is(err, authz.ErrDisabled) {
		t.Errorf("after Invalidate: error = %v, want ErrDisabled", err)
	}
}

func TestAuthenticateConcurrent(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			secret := f.secret
			if i%2 == 1 {
				secret, _ = authz.GenerateKey()
			}
			_, err := f.auth.Authenticate(context.Background(), secret)
			if (i%2 == 0) != (err == nil) {
				t.Errorf("goroutine %d: error = %v", i, err)
			}
		})
	}
	wg.Wait()
}

func TestGenerateKey(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k, err := authz.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != len(authz.KeyPrefix)+43 || k[:len(authz.KeyPrefix)] != authz.KeyPrefix || seen[k] {
			t.Fatalf("GenerateKey = %q: want %s + 43 chars, unique", k, authz.KeyPrefix)
		}
		seen[k] = true
	}
}

func BenchmarkAuthenticateCached(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "a.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	a, _ := s.CreateAccount(ctx, "acme")
	secret, _, _ := authz.CreateKey(ctx, s, a.ID, "", nil)
	auth := authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: time.Hour})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

// countingStore wraps a store, counting KeyByHash calls per hash; hook, when
// set, answers KeyByHash in its place.
type countingStore struct {
	authz.PrincipalStore
	mu    sync.Mutex
	calls map[[32]byte]int
	hook  func(ctx context.Context, hash [32]byte, call int) (authz.Key, error)
}

func (s *countingStore) KeyByHash(ctx context.Context, hash [32]byte) (authz.Key, error) {
	s.mu.Lock()
	s.calls[hash]++
	call, hook := s.calls[hash], s.hook
	s.mu.Unlock()
	if hook != nil {
		return hook(ctx, hash, call)
	}
	return s.PrincipalStore.KeyByHash(ctx, hash)
}

func (s *countingStore) count(secret string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[authz.HashKey(secret)]
}

// counting puts a countingStore in front of f's store and points f.auth at
// it, with cfg and f's clock.
func (f *fixture) counting(cfg authz.AuthenticatorConfig) *countingStore {
	cs := &countingStore{PrincipalStore: f.store, calls: map[[32]byte]int{}}
	cfg.Now = func() time.Time { return f.now }
	f.auth = authz.NewAuthenticator(cs, cfg)
	return cs
}

func mustAuthenticate(t *testing.T, auth *authz.Authenticator, secret string) {
	t.Helper()
	if _, err := auth.Authenticate(context.Background(), secret); err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
}

func TestAuthenticateFloodKeepsValidKeys(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cs := f.counting(authz.AuthenticatorConfig{TTL: time.Hour})
	valid := authz.HashKey(f.secret)
	cs.hook = func(ctx context.Context, hash [32]byte, _ int) (authz.Key, error) {
		if hash != valid {
			return authz.Key{}, authz.ErrNotFound // as SQLite would, minus the query
		}
		return f.store.KeyByHash(ctx, hash)
	}
	mustAuthenticate(t, f.auth, f.secret)
	const flood = 100_000
	var last string
	for i := range flood {
		last, _ = authz.GenerateKey()
		if _, err := f.auth.Authenticate(ctx, last); !errors.Is(err, authz.ErrUnauthenticated) {
			t.Fatalf("unknown key %d: error = %v, want ErrUnauthenticated", i, err)
		}
		if i%10_000 == 0 {
			mustAuthenticate(t, f.auth, f.secret)
		}
	}
	mustAuthenticate(t, f.auth, f.secret)
	if n := cs.count(f.secret); n != 1 {
		t.Errorf("valid key looked up %d times during a flood, want 1 (evicted from the cache)", n)
	}
	// Refusals are still cached, within their own bound.
	if _, err := f.auth.Authenticate(ctx, last); !errors.Is(err, authz.ErrUnauthenticated) {
		t.Fatalf("last unknown key again: error = %v", err)
	}
	if n := cs.count(last); n != 1 {
		t.Errorf("last unknown key looked up %d times, want 1 (refusal cached)", n)
	}
	if st := f.auth.Stats(); st.Lookups != flood+1 || st.CacheHits != flood/10_000+2 || st.StoreErrors != 0 {
		t.Errorf("Stats = %+v, want %d lookups, %d hits, no errors", st, flood+1, flood/10_000+2)
	}
}

func TestAuthenticateEvictsOldestPrincipal(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cs := f.counting(authz.AuthenticatorConfig{TTL: time.Hour, MaxEntries: 2})
	secrets := []string{f.secret, "", ""}
	for i := 1; i < len(secrets); i++ {
		var err error
		if secrets[i], _, err = authz.CreateKey(ctx, f.store, f.acct.ID, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range secrets {
		mustAuthenticate(t, f.auth, s)
	}
	// The cache holds two: the newest stay, the oldest made room. Key 0
	// goes last, as looking it up again evicts the then oldest.
	for _, c := range []struct{ key, lookups int }{{1, 1}, {2, 1}, {0, 2}} {
		mustAuthenticate(t, f.auth, secrets[c.key])
		if n := cs.count(secrets[c.key]); n != c.lookups {
			t.Errorf("key %d looked up %d times, want %d", c.key, n, c.lookups)
		}
	}
}

func TestAuthenticateCoalescesConcurrentMisses(t *testing.T) {
	f := newFixture(t)
	cs := f.counting(authz.AuthenticatorConfig{})
	entered, release := make(chan struct{}), make(chan struct{})
	cs.hook = func(ctx context.Context, hash [32]byte, call int) (authz.Key, error) {
		if call == 1 {
			close(entered)
			<-release
		}
		return f.store.KeyByHash(ctx, hash)
	}
	const n = 50
	cancelled, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			ctx := context.Background()
			if i == 0 {
				ctx = cancelled // stops waiting; the others still get the answer
			}
			started.Done()
			p, err := f.auth.Authenticate(ctx, f.secret)
			switch {
			case i == 0 && !errors.Is(err, context.Canceled):
				t.Errorf("cancelled caller: error = %v, want context.Canceled", err)
			case i != 0 && (err != nil || p.KeyID != f.key.ID):
				t.Errorf("caller %d: %+v, %v", i, p, err)
			}
		})
	}
	started.Wait()
	<-entered
	time.Sleep(20 * time.Millisecond) // let the callers reach the shared lookup
	cancel()
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if got := cs.count(f.secret); got != 1 {
		t.Errorf("%d concurrent misses made %d store lookups, want 1", n, got)
	}
	if st := f.auth.Stats(); st.Lookups != 1 {
		t.Errorf("Stats().Lookups = %d, want 1", st.Lookups)
	}
}

func TestAuthenticateNeverResurrectsRevokedKey(t *testing.T) {
	for _, askDuring := range []bool{false, true} {
		name := "revoke during lookup"
		if askDuring {
			name += ", asked again meanwhile"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			cs := f.counting(authz.AuthenticatorConfig{TTL: time.Hour})
			entered, release := make(chan struct{}), make(chan struct{})
			cs.hook = func(ctx context.Context, hash [32]byte, call int) (authz.Key, error) {
				k, err := f.store.KeyByHash(ctx, hash)
				if call == 1 { // read before the revocation, answer after
					close(entered)
					<-release
				}
				return k, err
			}
			first := make(chan error, 1)
			go func() {
				_, err := f.auth.Authenticate(ctx, f.secret)
				first <- err
			}()
			<-entered
			if err := f.store.RevokeKey(ctx, f.key.ID); err != nil {
				t.Fatal(err)
			}
			f.auth.Invalidate()
			if askDuring {
				if _, err := f.auth.Authenticate(ctx, f.secret); !errors.Is(err, authz.ErrUnauthenticated) {
					t.Errorf("after Invalidate, stale lookup still running: error = %v, want ErrUnauthenticated", err)
				}
			}
			close(release)
			// The caller that was waiting looks up again rather than take
			// the answer read before the revocation.
			if err := <-first; !errors.Is(err, authz.ErrUnauthenticated) {
				t.Errorf("caller waiting across Invalidate: error = %v, want ErrUnauthenticated", err)
			}
			for range 2 {
				if _, err := f.auth.Authenticate(ctx, f.secret); !errors.Is(err, authz.ErrUnauthenticated) {
					t.Errorf("after the stale lookup ended: error = %v, want ErrUnauthenticated", err)
				}
			}
			if n := cs.count(f.secret); n != 2 {
				t.Errorf("store lookups = %d, want 2 (the stale one, one after Invalidate, then cached)", n)
			}
		})
	}
}

func TestAuthenticateStoreTimeout(t *testing.T) {
	for _, honoursCtx := range []bool{true, false} {
		name := "store ignores context"
		if honoursCtx {
			name = "store honours context"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			cs := f.counting(authz.AuthenticatorConfig{StoreTimeout: 50 * time.Millisecond})
			release := make(chan struct{})
			defer close(release)
			cs.hook = func(ctx context.Context, hash [32]byte, call int) (authz.Key, error) {
				if call == 1 {
					if honoursCtx {
						<-ctx.Done()
						return authz.Key{}, ctx.Err()
					}
					<-release
					return authz.Key{}, errors.New("too late")
				}
				return f.store.KeyByHash(ctx, hash)
			}
			_, err := f.auth.Authenticate(ctx, f.secret)
			if !errors.Is(err, authz.ErrUnavailable) || errors.Is(err, authz.ErrUnauthenticated) {
				t.Fatalf("store past StoreTimeout: error = %v, want ErrUnavailable", err)
			}
			if !honoursCtx {
				return // the lookup is still blocked; nothing more to see
			}
			mustAuthenticate(t, f.auth, f.secret) // the failure was not cached
			if n := cs.count(f.secret); n != 2 {
				t.Errorf("store lookups = %d, want 2", n)
			}
			// The timed-out lookup counts itself as it ends, maybe after
			// its caller has given up on it.
			for deadline := time.Now().Add(5 * time.Second); f.auth.Stats().StoreTimeouts == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if st := f.auth.Stats(); st.StoreTimeouts != 1 || st.StoreErrors != 1 || st.Lookups != 2 {
				t.Errorf("Stats = %+v, want 1 timeout, 1 error, 2 lookups", st)
			}
		})
	}
}

func TestAuthenticateStoreFailureNotCached(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cs := f.counting(authz.AuthenticatorConfig{TTL: time.Hour})
	boom := errors.New("connection refused")
	cs.hook = func(ctx context.Context, hash [32]byte, call int) (authz.Key, error) {
		if call == 1 {
			return authz.Key{}, boom
		}
		return f.store.KeyByHash(ctx, hash)
	}
	if _, err := f.auth.Authenticate(ctx, f.secret); !errors.Is(err, authz.ErrUnavailable) || !errors.Is(err, boom) {
		t.Fatalf("failing store: error = %v, want ErrUnavailable wrapping %v", err, boom)
	}
	mustAuthenticate(t, f.auth, f.secret)
	mustAuthenticate(t, f.auth, f.secret)
	if n := cs.count(f.secret); n != 2 {
		t.Errorf("store lookups = %d, want 2 (the failure not cached, the success cached)", n)
	}
	if st := f.auth.Stats(); st.StoreErrors != 1 || st.StoreTimeouts != 0 || st.CacheHits != 1 {
		t.Errorf("Stats = %+v, want 1 store error, 0 timeouts, 1 hit", st)
	}
}

func BenchmarkAuthenticateCachedRefusal(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "a.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	secret, _ := authz.GenerateKey()
	auth := authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: time.Hour})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(ctx, secret); !errors.Is(err, authz.ErrUnauthenticated) {
			b.Fatal(err)
		}
	}
}
