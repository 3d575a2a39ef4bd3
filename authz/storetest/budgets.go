package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// testBudgets: budgets on groups, accounts and keys are stored, read back,
// removed, and carried by the principal.
func testBudgets[S principalStore](t *testing.T, s S) {
	ctx := context.Background()
	month := &authz.Budget{Amount: 12_500_000_000, Period: authz.PeriodMonth, Alerts: true}
	day := &authz.Budget{Amount: 1, Period: authz.PeriodDay}
	week := &authz.Budget{Amount: 0, Period: authz.PeriodWindow, Window: 7 * 24 * time.Hour}
	g := mustGroup(t, s, authz.Group{Name: "spenders", Budget: month})
	a := mustAccount(t, s, "spender")
	a.GroupID, a.Budget = g.ID, day
	mustUpdateAccount(t, s, a)
	secret, k, err := authz.CreateKey(ctx, s, a.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	k.Budget = week
	if err := s.UpdateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	gotG, _ := s.GroupByID(ctx, g.ID)
	gotA, _ := s.AccountByID(ctx, a.ID)
	gotK, _ := s.KeyByID(ctx, k.ID)
	for name, d := range map[string]string{
		"group":   cmp.Diff(month, gotG.Budget),
		"account": cmp.Diff(day, gotA.Budget),
		"key":     cmp.Diff(week, gotK.Budget),
	} {
		if d != "" {
			t.Errorf("%s budget (-want +got):\n%s", name, d)
		}
	}
	p, err := authz.NewAuthenticator(s, authz.AuthenticatorConfig{}).Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]*authz.Budget{week, day, month}, []*authz.Budget{p.KeyBudget, p.AccountBudget, p.GroupBudget}); d != "" {
		t.Errorf("principal's budgets (-want +got):\n%s", d)
	}
	// A key created with a budget keeps it; nil removes one.
	k2, err := s.CreateKey(ctx, authz.Key{AccountID: a.ID, Prefix: "sk-b", Hash: [32]byte{1}, Budget: day})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KeyByID(ctx, k2.ID); cmp.Diff(day, got.Budget) != "" {
		t.Errorf("created key's budget = %+v", got.Budget)
	}
	gotA.Budget, gotG.Budget = nil, nil
	mustUpdateAccount(t, s, gotA)
	if err := s.UpdateGroup(ctx, gotG); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AccountByID(ctx, a.ID); got.Budget != nil {
		t.Errorf("account budget after removal = %+v", got.Budget)
	}
	if got, _ := s.GroupByID(ctx, g.ID); got.Budget != nil {
		t.Errorf("group budget after removal = %+v", got.Budget)
	}
}

// testGroupLimitsAreACap: an account's limits narrow its group's and never
// widen them; a limit of zero is kept as zero (nothing allowed), apart
// from unset.
func testGroupLimitsAreACap[S principalStore](t *testing.T, s S) {
	ctx := context.Background()
	g := mustGroup(t, s, authz.Group{Name: "capped", Limits: authz.Limits{RequestsPerMinute: new(int64(100)), TokensPerDay: new(int64(5000))}})
	a := mustAccount(t, s, "greedy")
	a.GroupID = g.ID
	a.Limits = authz.Limits{RequestsPerMinute: new(int64(1000)), TokensPerDay: new(int64(0)), ConcurrentRequests: new(int64(2))}
	mustUpdateAccount(t, s, a)
	secret, _, err := authz.CreateKey(ctx, s, a.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := authz.NewAuthenticator(s, authz.AuthenticatorConfig{}).Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	want := authz.Limits{RequestsPerMinute: new(int64(100)), TokensPerDay: new(int64(0)), ConcurrentRequests: new(int64(2))}
	if d := cmp.Diff(want, p.Limits); d != "" {
		t.Errorf("effective limits (-want +got):\n%s", d)
	}
}
