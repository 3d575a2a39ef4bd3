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
