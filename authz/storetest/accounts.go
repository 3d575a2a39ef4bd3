package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// accountStore is what the Accounts suite uses: accounts, and groups to
// put them in.
type accountStore interface {
	authz.Accounts
	authz.Groups
}

// Accounts tests authz.Accounts. An account may be put in a group: the
// stores have authz.Groups too.
func Accounts[S interface {
	authz.Accounts
	authz.Groups
}](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore,
		test[S]{"Accounts", testAccounts[S]},
		test[S]{"UpdateAccount", testUpdateAccount[S]},
	)
}

func testAccounts[S authz.Accounts](t *testing.T, s S) {
	ctx := context.Background()
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if a.ID == "" || a.CreatedAt.IsZero() || a.GroupID != "" || a.Models != nil || a.Guardrails != nil || a.Limits != (authz.Limits{}) {
		t.Errorf("CreateAccount = %+v, want an id, a creation time and nothing else set", a)
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
	for name, err := range map[string]error{
		"AccountByName":      second(s.AccountByName(ctx, "nobody")),
		"AccountByID":        second(s.AccountByID(ctx, "acct_missing")),
		"SetAccountDisabled": s.SetAccountDisabled(ctx, "acct_missing", true),
		"UpdateAccount":      s.UpdateAccount(ctx, authz.Account{ID: "acct_missing", Name: "x"}),
	} {
		if !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s(unknown) error = %v, want ErrNotFound", name, err)
		}
	}
	mustAccount(t, s, "zeta")
	mustAccount(t, s, "beta")
	list, err := s.ListAccounts(ctx)
	if err != nil {
		t.Fatalf("ListAccounts: %v", err)
	}
	if diff := cmp.Diff([]string{"acme", "beta", "zeta"}, names(list, func(a authz.Account) string { return a.Name })); diff != "" {
		t.Errorf("ListAccounts names, by name (-want +got):\n%s", diff)
	}
}

func testUpdateAccount[S accountStore](t *testing.T, s S) {
	ctx := context.Background()
	g := mustGroup(t, s, authz.Group{Name: "team"})
	a := mustAccount(t, s, "acme")
	mustAccount(t, s, "taken")
	a.Name, a.GroupID, a.Models, a.Disabled = "acme-2", g.ID, []string{"gpt-4o", "o3"}, true
	a.Guardrails = []string{"secrets", "pii"}
	a.Limits = authz.Limits{RequestsPerMinute: new(int64(60)), TokensPerDay: new(int64(1_000_000))}
	if err := s.UpdateAccount(ctx, a); err != nil {
		t.Fatalf("UpdateAccount: %v", err)
	}
	got, err := s.AccountByID(ctx, a.ID)
	if diff := cmp.Diff(a, got); err != nil || diff != "" {
		t.Errorf("AccountByID after UpdateAccount: %v (-want +got):\n%s", err, diff)
	}
	a.GroupID, a.Models, a.Guardrails, a.Limits = "", nil, nil, authz.Limits{}
	if err := s.UpdateAccount(ctx, a); err != nil {
		t.Fatalf("UpdateAccount(clearing): %v", err)
	}
	got, err = s.AccountByName(ctx, "acme-2")
	if diff := cmp.Diff(a, got); err != nil || diff != "" {
		t.Errorf("AccountByName after clearing: %v (-want +got):\n%s", err, diff)
	}
	if err := s.UpdateAccount(ctx, authz.Account{ID: a.ID, Name: "taken"}); !errors.Is(err, authz.ErrExists) {
		t.Errorf("UpdateAccount(taken name) error = %v, want ErrExists", err)
	}
	if err := s.UpdateAccount(ctx, authz.Account{ID: a.ID, Name: a.Name, GroupID: "grp_missing"}); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("UpdateAccount(unknown group) error = %v, want ErrNotFound", err)
	}
}
