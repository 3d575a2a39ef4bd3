// Package storetest is the conformance suite every authz.Store
// implementation must pass.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) authz.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s authz.Store)
	}{
		{"Accounts", testAccounts},
		{"Keys", testKeys},
		{"KeyDisableAndRevoke", testKeyDisableAndRevoke},
		{"Usage", testUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			tt.fn(t, s)
		})
	}
}

func testAccounts(t *testing.T, s authz.Store) {
	ctx := context.Background()
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if _, err := s.CreateAccount(ctx, "acme"); !errors.Is(err, authz.ErrExists) {
		t.Errorf("CreateAccount(duplicate) error = %v, want ErrExists", err)
	}
	byName, err := s.AccountByName(ctx, "acme")
	if err != nil {
		t.Fatalf("AccountByName: %v", err)
	}
	if diff := cmp.Diff(a, byName); diff != "" {
		t.Errorf("AccountByName (-created +got):\n%s", diff)
	}
	if err := s.SetAccountDisabled(ctx, a.ID, true); err != nil {
		t.Fatalf("SetAccountDisabled: %v", err)
	}
	byID, err := s.AccountByID(ctx, a.ID)
	if err != nil || !byID.Disabled {
		t.Errorf("AccountByID after disable = %+v, %v; want disabled", byID, err)
	}
	if _, err := s.AccountByName(ctx, "nobody"); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("AccountByName(unknown) error = %v, want ErrNotFound", err)
	}
	if err := s.SetAccountDisabled(ctx, "acct_missing", true); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("SetAccountDisabled(unknown) error = %v, want ErrNotFound", err)
	}
}

func testKeys(t *testing.T, s authz.Store) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	secret, k, err := authz.CreateKey(ctx, s, a.ID, "ci", []string{"gpt-4o", "gpt-4o-mini"})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	if k.Hash != authz.HashKey(secret) || k.Prefix != secret[:len(k.Prefix)] {
		t.Errorf("stored key = %+v, want hash and prefix of the secret", k)
	}
	for name, lookup := range map[string]func() (authz.Key, error){
		"KeyByHash":   func() (authz.Key, error) { return s.KeyByHash(ctx, authz.HashKey(secret)) },
		"KeyByID":     func() (authz.Key, error) { return s.KeyByID(ctx, k.ID) },
		"KeyByPrefix": func() (authz.Key, error) { return s.KeyByPrefix(ctx, k.Prefix) },
	} {
		got, err := lookup()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(k, got); diff != "" {
			t.Errorf("%s (-created +got):\n%s", name, diff)
		}
	}
	if _, err := s.CreateKey(ctx, k); !errors.Is(err, authz.ErrExists) {
		t.Errorf("CreateKey(same hash) error = %v, want ErrExists", err)
	}
	if _, err := s.CreateKey(ctx, authz.Key{AccountID: "acct_missing", Prefix: "x", Hash: authz.HashKey("other")}); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("CreateKey(unknown account) error = %v, want ErrNotFound", err)
	}
	if _, err := s.KeyByHash(ctx, authz.HashKey("nope")); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("KeyByHash(unknown) error = %v, want ErrNotFound", err)
	}
	_, k2, err := authz.CreateKey(ctx, s, a.ID, "second", nil)
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	list, err := s.ListKeys(ctx, a.ID)
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	if len(list) != 2 || list[0].ID != k.ID || list[1].ID != k2.ID || len(list[1].Models) != 0 {
		t.Errorf("ListKeys = %+v, want [%s %s] oldest first", list, k.ID, k2.ID)
	}
}

func testKeyDisableAndRevoke(t *testing.T, s authz.Store) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	_, k, err := authz.CreateKey(ctx, s, a.ID, "", nil)
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	if err := s.SetKeyDisabled(ctx, k.ID, true); err != nil {
		t.Fatalf("SetKeyDisabled: %v", err)
	}
	if got, _ := s.KeyByID(ctx, k.ID); !got.Disabled {
		t.Errorf("key after disable = %+v, want disabled", got)
	}
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	if got, _ := s.KeyByID(ctx, k.ID); got.RevokedAt == nil {
		t.Errorf("key after revoke = %+v, want RevokedAt set", got)
	}
	for name, err := range map[string]error{
		"SetKeyDisabled": s.SetKeyDisabled(ctx, "key_missing", true),
		"RevokeKey":      s.RevokeKey(ctx, "key_missing"),
	} {
		if !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s(unknown) error = %v, want ErrNotFound", name, err)
		}
	}
}

func testUsage(t *testing.T, s authz.Store) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	t0 := time.Now().Add(-time.Hour)
	for i, at := range []time.Time{t0.Add(-time.Minute), t0, t0.Add(time.Minute)} {
		rec := authz.UsageRecord{RequestID: string(rune('a' + i)), KeyID: "k", AccountID: a.ID, Endpoint: "chat.completions",
			Model: "gpt-4o", Backend: "b", Status: 200, PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, At: at}
		if err := s.AppendUsage(ctx, rec); err != nil {
			t.Fatalf("AppendUsage: %v", err)
		}
	}
	got, err := s.UsageSince(ctx, a.ID, t0)
	if err != nil {
		t.Fatalf("UsageSince: %v", err)
	}
	want := authz.UsageTotals{Requests: 2, PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UsageSince (-want +got):\n%s", diff)
	}
	if got, _ := s.UsageSince(ctx, "acct_other", t0); got.Requests != 0 {
		t.Errorf("UsageSince(other account) = %+v, want none", got)
	}
}

func mustAccount(t *testing.T, s authz.Store, name string) authz.Account {
	t.Helper()
	a, err := s.CreateAccount(context.Background(), name)
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return a
}
