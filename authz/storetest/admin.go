package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
	"modelgate/authz/pricing"
)

// Prices tests authz.Prices.
func Prices[S authz.Prices](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore, test[S]{"Prices", testPrices[S]})
}

// Audit tests authz.Audit.
func Audit[S authz.Audit](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore, test[S]{"Audit", testAudit[S]})
}

// testPrices: prices set at run time are listed by model and From, a
// price of the same model and From replaces the last, and deleting one
// leaves the others.
func testPrices[S authz.Prices](t *testing.T, s S) {
	ctx := context.Background()
	june := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	cached := pricing.Nanos(1_250_000_000)
	always := pricing.Price{Model: "gpt-4o", Input: 2_500_000_000, CachedInput: &cached, Output: 10_000_000_000,
		Images: []pricing.ImagePrice{{Size: "1024x1024", Quality: "hd", Each: 80_000_000}}}
	fromJune := pricing.Price{Model: "gpt-4o", From: june, Input: 2_000_000_000, Output: 8_000_000_000, AudioSecond: 100_000}
	other := pricing.Price{Model: "claude", Input: 3_000_000_000, Output: 15_000_000_000}
	for _, p := range []pricing.Price{fromJune, other, always} {
		if err := s.SetPrice(ctx, p); err != nil {
			t.Fatalf("SetPrice(%+v): %v", p, err)
		}
	}
	fromJune.Output = 9_000_000_000
	if err := s.SetPrice(ctx, fromJune); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]pricing.Price{other, always, fromJune}, got); d != "" {
		t.Errorf("ListPrices (-want +got):\n%s", d)
	}
	if err := s.DeletePrice(ctx, "gpt-4o", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePrice(ctx, "gpt-4o", time.Time{}); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	got, _ = s.ListPrices(ctx)
	if d := cmp.Diff([]pricing.Price{other, fromJune}, got); d != "" {
		t.Errorf("after the delete (-want +got):\n%s", d)
	}
}

// testAudit: entries come back newest first with what was recorded, a page
// at a time by cursor, and by target.
func testAudit[S authz.Audit](t *testing.T, s S) {
	ctx := context.Background()
	at := time.UnixMilli(1_800_000_000_000).UTC()
	var want []authz.AuditEntry
	for i, target := range []string{"acct_1", "key_1", "acct_1", "acct_2", "acct_1"} {
		e := authz.AuditEntry{At: at.Add(time.Duration(i) * time.Second), Actor: "admin API token", Action: "account.update",
			Target: target, Before: json.RawMessage(`{"name":"a"}`), After: json.RawMessage(`{"name":"b"}`)}
		if i == 0 {
			e.Action, e.Before = "account.create", nil
		}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		want = append([]authz.AuditEntry{e}, want...)
	}
	got, err := s.ListAudit(ctx, authz.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	ignoreID := cmp.Comparer(func(a, b authz.AuditEntry) bool {
		return a.At.Equal(b.At) && a.Actor == b.Actor && a.Action == b.Action && a.Target == b.Target &&
			string(a.Before) == string(b.Before) && string(a.After) == string(b.After)
	})
	if d := cmp.Diff(want, got, ignoreID); d != "" {
		t.Fatalf("ListAudit (-want +got):\n%s", d)
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID >= got[i-1].ID {
			t.Fatalf("ids are not decreasing: %d then %d", got[i-1].ID, got[i].ID)
		}
	}
	page, _ := s.ListAudit(ctx, authz.AuditQuery{Limit: 2})
	next, _ := s.ListAudit(ctx, authz.AuditQuery{Limit: 2, Before: page[1].ID})
	if len(page) != 2 || len(next) != 2 || next[0].ID != got[2].ID || next[1].ID != got[3].ID {
		t.Errorf("pages %v, %v: want entries 0-1 then 2-3 of %v", page, next, got)
	}
	byTarget, _ := s.ListAudit(ctx, authz.AuditQuery{Target: "acct_1"})
	if len(byTarget) != 3 || byTarget[0].ID != got[0].ID || byTarget[2].Before != nil {
		t.Errorf("acct_1's entries: %+v", byTarget)
	}
}
