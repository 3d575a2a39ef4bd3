// Package storetest is the conformance suite of the storage interfaces
// authz.Store embeds, and the benchmarks of a store's per-request paths.
//
// There is one suite a concern: Accounts, Groups, Keys, Principals (what
// the Authenticator makes of keys, accounts and groups stored together),
// Ledger (ledger.UsageStore), Captures (ledger.CaptureStore), Prices,
// Audit, Responses and Images (state.Responses, state.Images). Each tests its
// interface through that interface alone, bar the fixtures it needs of
// others (a key belongs to an account), which its type parameter names:
// a store of one concern can run its suite on its own. Run runs them all
// on an authz.Store, as every implementation of it must pass.
//
// newStore returns an empty store for each subtest, which run in
// parallel; a store with a Close method is closed when its subtest ends.
package storetest

import (
	"context"
	"io"
	"testing"

	"modelgate/authz"
)

// Run runs every suite, each a subtest named after it.
func Run(t *testing.T, newStore func(t *testing.T) authz.Store) {
	for _, suite := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Accounts", func(t *testing.T) { Accounts(t, newStore) }},
		{"Groups", func(t *testing.T) { Groups(t, newStore) }},
		{"Keys", func(t *testing.T) { Keys(t, newStore) }},
		{"Principals", func(t *testing.T) { Principals(t, newStore) }},
		{"Ledger", func(t *testing.T) { Ledger(t, newStore) }},
		{"Captures", func(t *testing.T) { Captures(t, newStore) }},
		{"Prices", func(t *testing.T) { Prices(t, newStore) }},
		{"Audit", func(t *testing.T) { Audit(t, newStore) }},
		{"Responses", func(t *testing.T) { Responses(t, newStore) }},
		{"Images", func(t *testing.T) { Images(t, newStore) }},
	} {
		t.Run(suite.name, func(t *testing.T) {
			t.Parallel()
			suite.run(t)
		})
	}
}

// test is one test of a suite over stores of type S.
type test[S any] struct {
	name string
	fn   func(t *testing.T, s S)
}

// run runs tests as parallel subtests of t, each on a store of its own.
func run[S any](t *testing.T, newStore func(t *testing.T) S, tests ...test[S]) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			if c, ok := any(s).(io.Closer); ok {
				t.Cleanup(func() { c.Close() })
			}
			tt.fn(t, s)
		})
	}
}

func mustAccount(t *testing.T, s authz.Accounts, name string) authz.Account {
	t.Helper()
	a, err := s.CreateAccount(context.Background(), name)
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return a
}

func mustGroup(t *testing.T, s authz.Groups, g authz.Group) authz.Group {
	t.Helper()
	g, err := s.CreateGroup(context.Background(), g)
	if err != nil {
		t.Fatalf("CreateGroup: %v", err)
	}
	return g
}

// mustUpdateAccount puts the account in a group with models and limits.
func mustUpdateAccount(t *testing.T, s authz.Accounts, a authz.Account) {
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
