package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// Groups tests authz.Groups.
func Groups[S authz.Groups](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore, test[S]{"Groups", testGroups[S]})
}

func testGroups[S authz.Groups](t *testing.T, s S) {
	ctx := context.Background()
	limits := authz.Limits{RequestsPerMinute: new(int64(100)), TokensPerMinute: new(int64(20_000)),
		TokensPerDay: new(int64(5_000_000)), ConcurrentRequests: new(int64(8))}
	g, err := s.CreateGroup(ctx, authz.Group{Name: "team", Models: []string{"gpt-4o", "claude"},
		Guardrails: []string{"pii", "no secrets"}, Limits: limits})
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
	g.Name, g.Models, g.Guardrails, g.Limits = "team-2", nil, []string{"tone"}, authz.Limits{ConcurrentRequests: new(int64(2))}
	if err := s.UpdateGroup(ctx, g); err != nil {
		t.Fatalf("UpdateGroup: %v", err)
	}
	if got, err := s.GroupByID(ctx, g.ID); err != nil || cmp.Diff(g, got) != "" {
		t.Errorf("GroupByID after UpdateGroup: %v (-want +got):\n%s", err, cmp.Diff(g, got))
	}
	g.Guardrails = nil
	if err := s.UpdateGroup(ctx, g); err != nil {
		t.Fatalf("UpdateGroup(clearing guardrails): %v", err)
	}
	if got, err := s.GroupByName(ctx, "team-2"); err != nil || cmp.Diff(g, got) != "" {
		t.Errorf("GroupByName after clearing guardrails: %v (-want +got):\n%s", err, cmp.Diff(g, got))
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
