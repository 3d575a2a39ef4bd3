package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// principalStore is what the Principals suite uses: keys, accounts and
// groups, which an Authenticator reads together.
type principalStore interface {
	authz.Accounts
	authz.Groups
	authz.Keys
}

// Principals tests what an Authenticator makes of the keys, accounts and
// groups a store holds: effective models, guardrails, limits and budgets,
// and the states, expiry and last use of keys.
func Principals[S interface {
	authz.Accounts
	authz.Groups
	authz.Keys
}](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore,
		test[S]{"EffectiveAccess", testEffectiveAccess[S]},
		test[S]{"EffectiveGuardrails", testEffectiveGuardrails[S]},
		test[S]{"Budgets", testBudgets[S]},
		test[S]{"GroupLimitsAreACap", testGroupLimitsAreACap[S]},
		test[S]{"AuthenticateStates", testAuthenticateStates[S]},
		test[S]{"AuthenticateExpiry", testAuthenticateExpiry[S]},
		test[S]{"AuthenticateLastUsed", testAuthenticateLastUsed[S]},
	)
}

// clock is a settable time source for the Authenticator.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newClock() *clock { return &clock{now: time.UnixMilli(1_800_000_000_000).UTC()} }

func testEffectiveAccess[S principalStore](t *testing.T, s S) {
	ctx := context.Background()
	g := mustGroup(t, s, authz.Group{Name: "team", Models: []string{"a", "b", "c"},
		Limits: authz.Limits{RequestsPerMinute: new(int64(100)), TokensPerMinute: new(int64(1000))}})
	other := mustGroup(t, s, authz.Group{Name: "narrow", Models: []string{"a"}})
	tests := []struct {
		name                       string
		group                      *authz.Group
		account, key               []string
		limits                     authz.Limits
		want                       []string
		wantNone                   bool
		allowed, denied            []string
		wantLimits                 authz.Limits
		wantGroupID, wantGroupName string
	}{
		{name: "no restriction anywhere", allowed: []string{"a", "anything"}},
		{name: "key only", key: []string{"x", "y"}, want: []string{"x", "y"}, allowed: []string{"x", "y"}, denied: []string{"z"}},
		{name: "group ∩ account ∩ key, in the key's order", group: &g, account: []string{"b", "c", "d"}, key: []string{"c", "e", "b"},
			limits: authz.Limits{RequestsPerMinute: new(int64(10)), TokensPerDay: new(int64(5000))},
			want:   []string{"c", "b"}, allowed: []string{"b", "c"}, denied: []string{"a", "d", "e"},
			wantLimits:  authz.Limits{RequestsPerMinute: new(int64(10)), TokensPerMinute: new(int64(1000)), TokensPerDay: new(int64(5000))},
			wantGroupID: g.ID, wantGroupName: "team"},
		{name: "group only", group: &g, want: []string{"a", "b", "c"}, allowed: []string{"a", "c"}, denied: []string{"d"},
			wantLimits: g.Limits, wantGroupID: g.ID, wantGroupName: "team"},
		{name: "nothing in common", group: &other, key: []string{"b"}, wantNone: true, denied: []string{"a", "b", "z"},
			wantGroupID: other.ID, wantGroupName: "narrow"},
		{name: "no group, account limits", account: []string{"a"}, limits: authz.Limits{ConcurrentRequests: new(int64(3))},
			want: []string{"a"}, allowed: []string{"a"}, denied: []string{"b"}, wantLimits: authz.Limits{ConcurrentRequests: new(int64(3))}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustAccount(t, s, "acct"+string(rune('a'+i)))
			a.Models, a.Limits = tt.account, tt.limits
			if tt.group != nil {
				a.GroupID = tt.group.ID
			}
			mustUpdateAccount(t, s, a)
			secret, k, err := authz.CreateKey(ctx, s, a.ID, "", tt.key)
			if err != nil {
				t.Fatal(err)
			}
			auth := authz.NewAuthenticator(s, authz.AuthenticatorConfig{})
			p, err := auth.Authenticate(ctx, secret)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			want := &authz.Principal{KeyID: k.ID, KeyPrefix: k.Prefix, AccountID: a.ID, AccountName: a.Name,
				GroupID: tt.wantGroupID, GroupName: tt.wantGroupName, Models: tt.want, NoModels: tt.wantNone, Limits: tt.wantLimits}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("principal (-want +got):\n%s", diff)
			}
			for _, m := range tt.allowed {
				if !p.Allows(m) {
					t.Errorf("Allows(%q) = false, want true", m)
				}
			}
			for _, m := range tt.denied {
				if p.Allows(m) {
					t.Errorf("Allows(%q) = true, want false", m)
				}
			}
		})
	}
}

// testEffectiveGuardrails checks that a principal's guardrails are the
// group's, then the account's, then the key's, each name once, and that a
// change to a level reaches it once the cache is invalidated.
func testEffectiveGuardrails[S principalStore](t *testing.T, s S) {
	ctx := context.Background()
	tests := []struct {
		name                      string
		group, account, key, want []string
	}{
		{name: "none anywhere"},
		{name: "key only", key: []string{"pii"}, want: []string{"pii"}},
		{name: "account only, no group", account: []string{"tone", "pii"}, want: []string{"tone", "pii"}},
		{name: "group's, account's, key's, each once", group: []string{"pii", "tone"}, account: []string{"secrets", "pii"},
			key: []string{"jailbreak", "tone", "secrets"}, want: []string{"pii", "tone", "secrets", "jailbreak"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustAccount(t, s, "acct"+string(rune('a'+i)))
			a.Guardrails = tt.account
			if tt.group != nil {
				a.GroupID = mustGroup(t, s, authz.Group{Name: "team" + string(rune('a'+i)), Guardrails: tt.group}).ID
			}
			mustUpdateAccount(t, s, a)
			secret, k, err := authz.IssueKey(ctx, s, authz.Key{AccountID: a.ID, Guardrails: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			auth := authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: time.Hour})
			p, err := auth.Authenticate(ctx, secret)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if diff := cmp.Diff(tt.want, p.Guardrails); diff != "" {
				t.Errorf("guardrails (-want +got):\n%s", diff)
			}
			k.Guardrails = append(k.Guardrails, "added")
			if err := s.UpdateKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			auth.Invalidate()
			if p, err = auth.Authenticate(ctx, secret); err != nil {
				t.Fatalf("Authenticate after UpdateKey: %v", err)
			}
			if want := append(slices.Clone(tt.want), "added"); !slices.Equal(want, p.Guardrails) {
				t.Errorf("after the key added a rule: guardrails %q, want %q", p.Guardrails, want)
			}
		})
	}
}

func testAuthenticateStates[S principalStore](t *testing.T, s S) {
	ctx := context.Background()
	c := newClock()
	tests := []struct {
		name    string
		prepare func(a authz.Account, k authz.Key) error
		wantErr error
	}{
		{"valid", func(authz.Account, authz.Key) error { return nil }, nil},
		{"revoked", func(_ authz.Account, k authz.Key) error { return s.RevokeKey(ctx, k.ID) }, authz.ErrUnauthenticated},
		{"disabled key", func(_ authz.Account, k authz.Key) error { return s.SetKeyDisabled(ctx, k.ID, true) }, authz.ErrDisabled},
		{"disabled account", func(a authz.Account, _ authz.Key) error { return s.SetAccountDisabled(ctx, a.ID, true) }, authz.ErrDisabled},
		{"expired", func(_ authz.Account, k authz.Key) error {
			k.ExpiresAt = &c.now
			return s.UpdateKey(ctx, k)
		}, authz.ErrUnauthenticated},
		{"expired and disabled", func(_ authz.Account, k authz.Key) error {
			k.ExpiresAt, k.Disabled = new(c.now.Add(-time.Hour)), true
			return s.UpdateKey(ctx, k)
		}, authz.ErrUnauthenticated},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustAccount(t, s, "acct"+string(rune('a'+i)))
			secret, k, err := authz.CreateKey(ctx, s, a.ID, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.prepare(a, k); err != nil {
				t.Fatal(err)
			}
			auth := authz.NewAuthenticator(s, authz.AuthenticatorConfig{Now: c.Now})
			if _, err := auth.Authenticate(ctx, secret); !errors.Is(err, tt.wantErr) {
				t.Errorf("Authenticate error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func testAuthenticateExpiry[S principalStore](t *testing.T, s S) {
	ctx := context.Background()
	c := newClock()
	a := mustAccount(t, s, "acme")
	secret, _, err := authz.IssueKey(ctx, s, authz.Key{AccountID: a.ID, ExpiresAt: new(c.now.Add(time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	auth := authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: time.Hour, Now: c.Now})
	if _, err := auth.Authenticate(ctx, secret); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	c.now = c.now.Add(59 * time.Second)
	if _, err := auth.Authenticate(ctx, secret); err != nil {
		t.Fatalf("just before expiry: %v", err)
	}
	c.now = c.now.Add(time.Second) // well within the cache TTL
	if _, err := auth.Authenticate(ctx, secret); !errors.Is(err, authz.ErrUnauthenticated) {
		t.Errorf("at expiry, principal cached: error = %v, want ErrUnauthenticated", err)
	}
}

// testAuthenticateLastUsed checks the documented bound: cache hits never
// write, and a miss writes only when the stored time is an interval old.
func testAuthenticateLastUsed[S principalStore](t *testing.T, s S) {
	ctx := context.Background()
	c := newClock()
	a := mustAccount(t, s, "acme")
	secret, k, err := authz.CreateKey(ctx, s, a.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	auth := authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: 10 * time.Second, LastUsedInterval: time.Minute, Now: c.Now})
	t0 := c.now
	for _, step := range []struct {
		advance    time.Duration
		invalidate bool
		want       time.Time
	}{
		{0, false, t0},                                         // first use is recorded
		{5 * time.Second, false, t0},                           // cache hit: no write
		{25 * time.Second, true, t0},                           // miss, but recorded 30s ago
		{31 * time.Second, false, t0.Add(61 * time.Second)},    // cache expired, a minute passed
		{2 * time.Second, true, t0.Add(61 * time.Second)},      // miss, fresh enough
		{time.Hour, false, t0.Add(time.Hour + 63*time.Second)}, // idle, then used again
	} {
		c.now = c.now.Add(step.advance)
		if step.invalidate {
			auth.Invalidate()
		}
		if _, err := auth.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		got, err := s.KeyByID(ctx, k.ID)
		if err != nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(step.want) {
			t.Errorf("at +%v: LastUsedAt = %v, %v; want %v", c.now.Sub(t0), got.LastUsedAt, err, step.want)
		}
	}
}
