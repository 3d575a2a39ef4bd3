package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"modelgate/authz"
	"modelgate/authz/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) authz.Store {
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "test.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "test.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	if got, err := s.AccountByName(ctx, "acme"); err != nil || got.ID != a.ID {
		t.Errorf("AccountByName after reopen = %+v, %v; want %s", got, err, a.ID)
	}
}
