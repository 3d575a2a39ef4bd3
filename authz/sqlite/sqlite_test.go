package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
	"modelgate/authz/internal/migrate"
	"modelgate/authz/ledger"
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

// usageBatch returns n records numbered from first, each field derived
// from its number so that a stored row shows which record it came from.
func usageBatch(first, n int) []ledger.UsageRecord {
	recs := make([]ledger.UsageRecord, n)
	for i := range recs {
		k := first + i
		recs[i] = ledger.UsageRecord{ID: "rec-" + strconv.Itoa(k), RequestID: "req-" + strconv.Itoa(k),
			KeyID: "key_" + strconv.Itoa(k%3), AccountID: "acct_" + strconv.Itoa(k%2), Endpoint: "chat.completions",
			Model: "gpt-4o", RequestedModel: "gpt-4o" + []string{"", "-latest"}[k%2], ProviderModel: "gpt-4o-2024-08-06",
			Backend: "openai", Status: 200 + k%5, PromptTokens: int64(800 + k), CompletionTokens: int64(k),
			TotalTokens: int64(800 + 2*k), CachedTokens: int64(k % 7), ReasoningTokens: int64(k % 11), Estimated: k%4 == 0,
			Attempt: k % 3, Duration: time.Duration(1000+k) * time.Millisecond, At: time.UnixMilli(1700000000000 + int64(k)).UTC()}
	}
	return recs
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
		if rs, err := s.ListRequests(ctx, ledger.RequestQuery{RequestID: "r1"}); err != nil || len(rs) != 1 || rs[0].Guardrails != nil {
			t.Errorf("a request recorded before guardrails: %+v, %v; want no outcomes", rs, err)
		}
		if rs, err := s.ListRequests(ctx, ledger.RequestQuery{Guard: ledger.GuardAllowed}); err != nil || len(rs) != 0 {
			t.Errorf("Guard filter over a request recorded before guardrails: %+v, %v; want none", rs, err)
		}
		if rs, err := s.ListRequests(ctx, ledger.RequestQuery{Model: "gpt-4o"}); err != nil || len(rs) != 1 ||
			rs[0].RequestedModel != "" || rs[0].ProviderModel != "" {
			t.Errorf("a request recorded before model names, by its model: %+v, %v; want r1 with none", rs, err)
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

// TestAppendUsageBatchSizes checks that batches of every size land in
// full, through any mix of the prepared row groups, and that a record id
// already stored, earlier in the batch or before, is not stored again,
// while records without an id always are.
func TestAppendUsageBatchSizes(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 3, 17, 63, 64, 65, 100, 130} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := openTest(t)
			defer s.Close()
			first := usageBatch(0, n)
			if n >= 3 {
				first[n-1].ID = first[n/2].ID // within the batch
			}
			// Overlapping the first (between batches), differing in backend.
			second := usageBatch(n/2, n)
			for i := range second {
				second[i].Backend = "retry"
			}
			second[len(second)-1].ID = "" // stored each time
			var want []ledger.UsageRecord
			seen := map[string]bool{}
			for _, batch := range [][]ledger.UsageRecord{first, second, second} {
				if err := s.AppendUsageBatch(ctx, batch); err != nil {
					t.Fatalf("AppendUsageBatch: %v", err)
				}
				for _, r := range batch {
					if r.ID == "" || !seen[r.ID] {
						want = append(want, r)
						seen[r.ID] = true
					}
				}
			}
			if diff := cmp.Diff(want, storedUsage(t, s)); diff != "" {
				t.Errorf("stored usage (-want +got):\n%s", diff)
			}
		})
	}
}

// storedUsage reads every usage row in the order it was inserted.
func storedUsage(t *testing.T, s *Store) []ledger.UsageRecord {
	t.Helper()
	rows, err := s.db.Query(`SELECT record_id, request_id, key_id, account_id, endpoint, model, requested_model, provider_model,
		backend, status, prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens, estimated, attempt,
		duration_ms, at FROM usage ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ledger.UsageRecord
	for rows.Next() {
		var r ledger.UsageRecord
		var id sql.NullString
		var duration, at int64
		if err := rows.Scan(&id, &r.RequestID, &r.KeyID, &r.AccountID, &r.Endpoint, &r.Model, &r.RequestedModel, &r.ProviderModel,
			&r.Backend, &r.Status,
			&r.PromptTokens, &r.CompletionTokens, &r.TotalTokens, &r.CachedTokens, &r.ReasoningTokens, &r.Estimated,
			&r.Attempt, &duration, &at); err != nil {
			t.Fatal(err)
		}
		r.ID, r.Duration, r.At = id.String, time.Duration(duration)*time.Millisecond, fromMS(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A limit of 0 stored before version 10 meant "no limit"; upgrading keeps
// that meaning (unset), since 0 now allows nothing. Other limits stay.
func TestUpgradeKeepsZeroLimitsUnlimited(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v9.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var prepare []string
	for _, m := range ms[:9] {
		prepare = append(prepare, m.SQL)
	}
	prepare = append(prepare, `CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (9)`,
		`INSERT INTO groups (id, name, models, requests_per_minute, tokens_per_day, created_at) VALUES ('grp_old', 'g', '', 0, 500, 1700000000000)`,
		`INSERT INTO accounts (id, name, group_id, requests_per_minute, concurrent_requests, created_at) VALUES ('acct_old', 'a', 'grp_old', 0, 0, 1700000000000)`)
	for _, q := range prepare {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("preparing version 9: %v\n%s", err, q)
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, _ := s.GroupByID(ctx, "grp_old")
	a, _ := s.AccountByID(ctx, "acct_old")
	if g.Limits.RequestsPerMinute != nil || g.Limits.TokensPerDay == nil || *g.Limits.TokensPerDay != 500 || g.Budget != nil {
		t.Errorf("group after the upgrade: %+v", g)
	}
	if a.Limits != (authz.Limits{}) || a.Budget != nil {
		t.Errorf("account after the upgrade: %+v", a.Limits)
	}
}

// A capture or usage record SQLite refuses for its content (here, a
// trigger's rule it breaks) fails its whole batch, also one written in
// several statements, with an error that is ledger.ErrRefused; a store
// that is away fails it with one that is not.
func TestRefusedWritesAreErrRefused(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	for _, table := range []string{"captures", "usage"} {
		if _, err := s.db.ExecContext(ctx, `CREATE TRIGGER `+table+`_not_poison BEFORE INSERT ON `+table+`
			WHEN NEW.model = 'poison' BEGIN SELECT RAISE(ABORT, 'poison'); END`); err != nil {
			t.Fatal(err)
		}
	}
	var batch []ledger.Capture
	for i := range 3*captureRows + 5 {
		batch = append(batch, ledger.Capture{RequestID: "req-" + strconv.Itoa(i), Endpoint: "chat.completions", Model: "m",
			Status: 200, At: time.UnixMilli(1_800_000_000_000), Request: "{}", Response: "{}"})
	}
	batch[2*captureRows+1].Model = "poison" // in the third statement
	if err := s.SaveCaptures(ctx, batch); !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("SaveCaptures = %v, want ErrRefused", err)
	}
	if _, err := s.CaptureOf(ctx, "req-0"); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("a capture of a refused batch was kept: %v", err)
	}
	usage := usageBatch(0, 100)
	usage[70].Model = "poison"
	if err := s.AppendUsageBatch(ctx, usage); !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("AppendUsageBatch = %v, want ErrRefused", err)
	}
	s.Close()
	batch[2*captureRows+1].Model = "m"
	if err := s.SaveCaptures(ctx, batch); err == nil || errors.Is(err, ledger.ErrRefused) {
		t.Errorf("SaveCaptures to a closed store = %v, want an error that is not ErrRefused", err)
	}
}
