package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// keyStore is what the Keys suite uses: keys, and accounts to own them.
type keyStore interface {
	authz.Accounts
	authz.Keys
}

// Keys tests authz.Keys. Keys belong to accounts: the stores have
// authz.Accounts too.
func Keys[S interface {
	authz.Accounts
	authz.Keys
}](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore,
		test[S]{"Keys", testKeys[S]},
		test[S]{"KeyPrefixAmbiguous", testKeyPrefixAmbiguous[S]},
		test[S]{"KeyDisableAndRevoke", testKeyDisableAndRevoke[S]},
		test[S]{"UpdateKey", testUpdateKey[S]},
		test[S]{"TouchKey", testTouchKey[S]},
	)
}

func testKeys[S keyStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	// Nanoseconds that the store must drop like it drops them on read.
	expires := time.Now().Add(24 * time.Hour).Truncate(time.Millisecond).Add(123456 * time.Nanosecond)
	secret, k, err := authz.IssueKey(ctx, s, authz.Key{AccountID: a.ID, Name: "ci", Models: []string{"gpt-4o", "gpt-4o-mini"},
		Guardrails: []string{"pii", "no secrets"}, ExpiresAt: &expires})
	if err != nil {
		t.Fatalf("IssueKey: %v", err)
	}
	if k.Hash != authz.HashKey(secret) || k.Prefix != secret[:len(k.Prefix)] {
		t.Errorf("stored key = %+v, want hash and prefix of the secret", k)
	}
	if k.ID == "" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(expires.Truncate(time.Millisecond)) || k.LastUsedAt != nil || k.RevokedAt != nil {
		t.Errorf("stored key = %+v, want an id, expiry %v in milliseconds, never used", k, expires)
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
	for name, err := range map[string]error{
		"KeyByHash":   second(s.KeyByHash(ctx, authz.HashKey("nope"))),
		"KeyByID":     second(s.KeyByID(ctx, "key_missing")),
		"KeyByPrefix": second(s.KeyByPrefix(ctx, "sk-mg-nope")),
	} {
		if !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s(unknown) error = %v, want ErrNotFound", name, err)
		}
	}
	// Created within the same millisecond, they still list oldest first.
	want := []string{k.ID}
	for _, name := range []string{"second", "third", "fourth"} {
		_, k, err := authz.CreateKey(ctx, s, a.ID, name, nil)
		if err != nil {
			t.Fatalf("CreateKey: %v", err)
		}
		want = append(want, k.ID)
	}
	list, err := s.ListKeys(ctx, a.ID)
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	if diff := cmp.Diff(want, names(list, func(k authz.Key) string { return k.ID })); diff != "" || list[1].Models != nil || list[1].Guardrails != nil {
		t.Errorf("ListKeys ids, oldest first (-want +got):\n%s\nsecond key's models = %#v, guardrails = %#v; want nil",
			diff, list[1].Models, list[1].Guardrails)
	}
	if list, err := s.ListKeys(ctx, "acct_other"); err != nil || len(list) != 0 {
		t.Errorf("ListKeys(other account) = %v, %v; want none", list, err)
	}
}

func testKeyPrefixAmbiguous[S keyStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	for _, secret := range []string{"one", "two"} {
		if _, err := s.CreateKey(ctx, authz.Key{AccountID: a.ID, Prefix: "sk-mg-same", Hash: authz.HashKey(secret)}); err != nil {
			t.Fatalf("CreateKey: %v", err)
		}
	}
	if _, err := s.KeyByPrefix(ctx, "sk-mg-same"); err == nil || errors.Is(err, authz.ErrNotFound) {
		t.Errorf("KeyByPrefix(shared prefix) error = %v, want an ambiguity error", err)
	}
}

func testKeyDisableAndRevoke[S keyStore](t *testing.T, s S) {
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
	revoked, _ := s.KeyByID(ctx, k.ID)
	if revoked.RevokedAt == nil {
		t.Fatalf("key after revoke = %+v, want RevokedAt set", revoked)
	}
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatalf("RevokeKey(again): %v", err)
	}
	if again, _ := s.KeyByID(ctx, k.ID); again.RevokedAt == nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
		t.Errorf("revoking twice moved RevokedAt from %v to %v", revoked.RevokedAt, again.RevokedAt)
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

func testUpdateKey[S keyStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	_, k, err := authz.CreateKey(ctx, s, a.ID, "old", []string{"gpt-4o"})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	revoked, _ := s.KeyByID(ctx, k.ID)
	want := revoked
	want.Name, want.Models, want.Disabled, want.ExpiresAt = "new", []string{"o3", "gpt-5"}, true, new(time.UnixMilli(1_900_000_000_123).UTC())
	want.Guardrails = []string{"tone", "pii"}
	// What UpdateKey must leave alone, whatever the caller passes.
	in := want
	in.AccountID, in.Prefix, in.Hash, in.RevokedAt, in.CreatedAt = "acct_other", "x", [32]byte{1}, nil, time.Unix(1, 0)
	if err := s.UpdateKey(ctx, in); err != nil {
		t.Fatalf("UpdateKey: %v", err)
	}
	got, err := s.KeyByID(ctx, k.ID)
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("KeyByID after UpdateKey: %v (-want +got):\n%s", err, diff)
	}
	want.Models, want.Guardrails, want.ExpiresAt = nil, nil, nil
	if err := s.UpdateKey(ctx, want); err != nil {
		t.Fatalf("UpdateKey(clearing): %v", err)
	}
	if got, err := s.KeyByID(ctx, k.ID); err != nil || cmp.Diff(want, got) != "" {
		t.Errorf("KeyByID after clearing: %v (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	if err := s.UpdateKey(ctx, authz.Key{ID: "key_missing"}); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("UpdateKey(unknown) error = %v, want ErrNotFound", err)
	}
}

func testTouchKey[S keyStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	_, k, err := authz.CreateKey(ctx, s, a.ID, "", nil)
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	t0 := time.UnixMilli(1_800_000_000_000).UTC()
	for _, step := range []struct {
		at, want time.Time
	}{
		{t0, t0},
		{t0.Add(-time.Hour), t0}, // an older use, recorded late, does not go back
		{t0.Add(time.Minute + 7*time.Millisecond), t0.Add(time.Minute + 7*time.Millisecond)},
	} {
		if err := s.TouchKey(ctx, k.ID, step.at); err != nil {
			t.Fatalf("TouchKey(%v): %v", step.at, err)
		}
		got, _ := s.KeyByID(ctx, k.ID)
		if got.LastUsedAt == nil || !got.LastUsedAt.Equal(step.want) {
			t.Errorf("after TouchKey(%v): LastUsedAt = %v, want %v", step.at, got.LastUsedAt, step.want)
		}
	}
	if err := s.TouchKey(ctx, "key_missing", t0); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("TouchKey(unknown) error = %v, want ErrNotFound", err)
	}
}
