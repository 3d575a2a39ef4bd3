package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
	"modelgate/authz/internal/migrate"
	"modelgate/authz/storetest"
)

func openTest(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "test.db"))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) authz.Store { return openTest(t) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) authz.Store { return openTest(b) })
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

// TestUpgradeFromVersion3 opens a database as the releases before groups
// left it (schema version 3, with data) and checks it upgrades in place.
func TestUpgradeFromVersion3(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	hash := authz.HashKey("sk-mg-an-old-key-from-version-3")
	for _, q := range []string{ms[0].SQL, ms[1].SQL, ms[2].SQL,
		`CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (3)`,
		`INSERT INTO accounts (id, name, created_at) VALUES ('acct_old', 'old', 1700000000000)`,
		`INSERT INTO keys (id, account_id, name, prefix, hash, models, created_at)
			VALUES ('key_old', 'acct_old', 'k', 'sk-mg-an-old', x'` + hex.EncodeToString(hash[:]) + `', 'gpt-4o', 1700000000000)`,
		`INSERT INTO usage VALUES ('r1', 'key_old', 'acct_old', 'chat.completions', 'gpt-4o', 'b', 200, 1, 2, 3, 0, 0, 10, 1700000000000)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("preparing version 3: %v\n%s", err, q)
		}
	}
	db.Close()

	for range 2 { // the second Open finds nothing to do
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		k, err := s.KeyByHash(ctx, hash)
		want := authz.Key{ID: "key_old", AccountID: "acct_old", Name: "k", Prefix: "sk-mg-an-old", Hash: hash,
			Models: []string{"gpt-4o"}, CreatedAt: time.UnixMilli(1700000000000).UTC()}
		if diff := cmp.Diff(want, k); err != nil || diff != "" {
			t.Errorf("KeyByHash after upgrade: %v (-want +got):\n%s", err, diff)
		}
		a, err := s.AccountByID(ctx, "acct_old")
		if err != nil || a.Name != "old" || a.GroupID != "" || a.Limits != (authz.Limits{}) {
			t.Errorf("AccountByID after upgrade = %+v, %v", a, err)
		}
		if u, err := s.UsageSince(ctx, "acct_old", time.UnixMilli(0)); err != nil || u.Requests != 1 || u.TotalTokens != 3 {
			t.Errorf("UsageSince after upgrade = %+v, %v", u, err)
		}
		var version int
		if err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil || version != len(ms) {
			t.Errorf("schema version = %d, %v; want %d", version, err, len(ms))
		}
		s.Close()
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE schema_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(ctx, path); err == nil {
		s.Close()
		t.Error("Open of a database migrated by a newer binary succeeded")
	}
}
