// Package storetest is the conformance suite every authz.Store
// implementation must pass, and the benchmarks of its per-request paths.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// Run runs the suite; newStore returns an empty store for each subtest,
// which run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) authz.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s authz.Store)
	}{
		{"Accounts", testAccounts},
		{"UpdateAccount", testUpdateAccount},
		{"Groups", testGroups},
		{"Keys", testKeys},
		{"KeyPrefixAmbiguous", testKeyPrefixAmbiguous},
		{"KeyDisableAndRevoke", testKeyDisableAndRevoke},
		{"UpdateKey", testUpdateKey},
		{"TouchKey", testTouchKey},
		{"EffectiveAccess", testEffectiveAccess},
		{"Budgets", testBudgets},
		{"GroupLimitsAreACap", testGroupLimitsAreACap},
		{"Prices", testPrices},
		{"Audit", testAudit},
		{"UsageRetention", testUsageRetention},
		{"Requests", testRequests},
		{"Captures", testCaptures},
		{"AuthenticateStates", testAuthenticateStates},
		{"AuthenticateExpiry", testAuthenticateExpiry},
		{"AuthenticateLastUsed", testAuthenticateLastUsed},
		{"Usage", testUsage},
		{"UsageReport", testUsageReport},
		{"SpentSince", testSpentSince},
		{"UsageConcurrent", testUsageConcurrent},
		{"UsageIdempotent", testUsageIdempotent},
		{"Responses", testResponses},
		{"ResponseObjects", testResponseObjects},
		{"Images", testImages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
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
	if a.ID == "" || a.CreatedAt.IsZero() || a.GroupID != "" || a.Models != nil || a.Limits != (authz.Limits{}) {
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

func testUpdateAccount(t *testing.T, s authz.Store) {
	ctx := context.Background()
	g := mustGroup(t, s, authz.Group{Name: "team"})
	a := mustAccount(t, s, "acme")
	mustAccount(t, s, "taken")
	a.Name, a.GroupID, a.Models, a.Disabled = "acme-2", g.ID, []string{"gpt-4o", "o3"}, true
	a.Limits = authz.Limits{RequestsPerMinute: new(int64(60)), TokensPerDay: new(int64(1_000_000))}
	if err := s.UpdateAccount(ctx, a); err != nil {
		t.Fatalf("UpdateAccount: %v", err)
	}
	got, err := s.AccountByID(ctx, a.ID)
	if diff := cmp.Diff(a, got); err != nil || diff != "" {
		t.Errorf("AccountByID after UpdateAccount: %v (-want +got):\n%s", err, diff)
	}
	a.GroupID, a.Models, a.Limits = "", nil, authz.Limits{}
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

func testGroups(t *testing.T, s authz.Store) {
	ctx := context.Background()
	limits := authz.Limits{RequestsPerMinute: new(int64(100)), TokensPerMinute: new(int64(20_000)),
		TokensPerDay: new(int64(5_000_000)), ConcurrentRequests: new(int64(8))}
	g, err := s.CreateGroup(ctx, authz.Group{Name: "team", Models: []string{"gpt-4o", "claude"}, Limits: limits})
	if err != nil {
		t.Fatalf("CreateGroup: %v", err)
	}
	if g.ID == "" || g.CreatedAt.IsZero() || g.CreatedAt != g.CreatedAt.Truncate(time.Millisecond) {
		t.Errorf("CreateGroup = %+v, want an id and a creation time in milliseconds", g)
	}
	if _, err := s.CreateGroup(ctx, authz.Group{Name: "team"}); !errors.Is(err, authz.ErrExists) {
		t.Errorf("CreateGroup(duplicate) error = %v, want ErrExists", err)
	}
	for name, lookup := range map[string]func() (authz.Group, error){
		"GroupByID":   func() (authz.Group, error) { return s.GroupByID(ctx, g.ID) },
		"GroupByName": func() (authz.Group, error) { return s.GroupByName(ctx, "team") },
	} {
		got, err := lookup()
		if diff := cmp.Diff(g, got); err != nil || diff != "" {
			t.Errorf("%s: %v (-created +got):\n%s", name, err, diff)
		}
	}
	g.Name, g.Models, g.Limits = "team-2", nil, authz.Limits{ConcurrentRequests: new(int64(2))}
	if err := s.UpdateGroup(ctx, g); err != nil {
		t.Fatalf("UpdateGroup: %v", err)
	}
	if got, err := s.GroupByID(ctx, g.ID); err != nil || cmp.Diff(g, got) != "" {
		t.Errorf("GroupByID after UpdateGroup: %v (-want +got):\n%s", err, cmp.Diff(g, got))
	}
	mustGroup(t, s, authz.Group{Name: "admins"})
	if err := s.UpdateGroup(ctx, authz.Group{ID: g.ID, Name: "admins"}); !errors.Is(err, authz.ErrExists) {
		t.Errorf("UpdateGroup(taken name) error = %v, want ErrExists", err)
	}
	for name, err := range map[string]error{
		"GroupByID":   second(s.GroupByID(ctx, "grp_missing")),
		"GroupByName": second(s.GroupByName(ctx, "nobody")),
		"UpdateGroup": s.UpdateGroup(ctx, authz.Group{ID: "grp_missing", Name: "x"}),
	} {
		if !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s(unknown) error = %v, want ErrNotFound", name, err)
		}
	}
	list, err := s.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if diff := cmp.Diff([]string{"admins", "team-2"}, names(list, func(g authz.Group) string { return g.Name })); diff != "" {
		t.Errorf("ListGroups names, by name (-want +got):\n%s", diff)
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

func mustGroup(t *testing.T, s authz.Store, g authz.Group) authz.Group {
	t.Helper()
	g, err := s.CreateGroup(context.Background(), g)
	if err != nil {
		t.Fatalf("CreateGroup: %v", err)
	}
	return g
}

// mustUpdateAccount puts the account in a group with models and limits.
func mustUpdateAccount(t *testing.T, s authz.Store, a authz.Account) {
	t.Helper()
	if err := s.UpdateAccount(context.Background(), a); err != nil {
		t.Fatalf("UpdateAccount: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func names[T any](list []T, name func(T) string) []string {
	var out []string
	for _, v := range list {
		out = append(out, name(v))
	}
	return out
}
