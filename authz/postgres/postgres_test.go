package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"modelgate/authz"
	"modelgate/authz/internal/pgtest"
	"modelgate/authz/ledger"
	"modelgate/authz/storetest"
)

func openTest(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(context.Background(), pgtest.Schema(tb))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	pgtest.Schema(t) // skip or fail once, not in every subtest
	storetest.Run(t, func(t *testing.T) authz.Store { return openTest(t) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) authz.Store { return openTest(b) })
}

// TestOpenConcurrentlyAndReopen starts replicas on an empty schema at once
// and again later: the schema is migrated once and kept.
func TestOpenConcurrentlyAndReopen(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Schema(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := Open(ctx, u)
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	s.Close()
	s, err = Open(ctx, u)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	if got, err := s.AccountByName(ctx, "acme"); err != nil || got.ID != a.ID {
		t.Errorf("AccountByName after reopen = %+v, %v; want %s", got, err, a.ID)
	}
	var applied, max int
	err = s.row(ctx, func(row pgx.Row) error { return row.Scan(&applied, &max) },
		`SELECT COUNT(*), MAX(version) FROM schema_migrations`)
	if err != nil || applied != max || max < 1 {
		t.Errorf("schema_migrations: %d rows up to version %d, %v; want each version once", applied, max, err)
	}
}

func TestOpenFails(t *testing.T) {
	ctx := context.Background()
	u := pgtest.Schema(t)
	for name, u := range map[string]string{
		"unreachable":    "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		"bad pool size":  pgtest.WithParam(t, u, "pool_max_conns", "0"),
		"newer schema":   u, // prepared below
		"missing schema": pgtest.WithParam(t, u, "search_path", "modelgate_test_missing"),
	} {
		if name == "newer schema" {
			s, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (1000, 'from the future')`); err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		if s, err := Open(ctx, u); err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// TestPoolSurvivesKilledConnections kills the pool's idle connections on
// the server side: a failed query closes its connection, and the next
// queries dial afresh.
func TestPoolSurvivesKilledConnections(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	if _, err := s.CreateAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	var pid uint32
	if err := s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error { pid = c.Conn().PgConn().PID(); return nil }); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	s.AccountByName(ctx, "acme") //nolint:errcheck // may fail: its connection was killed
	if _, err := s.AccountByName(ctx, "acme"); err != nil {
		t.Errorf("AccountByName after the connection was killed: %v", err)
	}
}

func TestPoolBoundsConnections(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.WithParam(t, pgtest.Schema(t), "pool_max_conns", "2"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	pids := map[uint32]bool{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			err := s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
				mu.Lock()
				pids[c.Conn().PgConn().PID()] = true
				mu.Unlock()
				_, err := c.Exec(ctx, `SELECT pg_sleep(0.01)`)
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(pids) > 2 {
		t.Errorf("%d connections used, want at most pool_max_conns=2", len(pids))
	}
}

// A record PostgreSQL refuses for what it holds fails its batch with
// ledger.ErrRefused, so that the ledger sets it aside instead of retrying
// it forever; an outage is no refusal.
func TestAppendUsageBatchRefusal(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	good := ledger.UsageRecord{ID: "use_good", RequestID: "r", Endpoint: "chat.completions", Status: 200, At: time.Now()}
	for name, bad := range map[string]ledger.UsageRecord{
		"invalid UTF-8": {ID: "use_bad", RequestID: "r", SessionID: "sess\xff\xfe", At: time.Now()},
		"NUL in text":   {ID: "use_bad", RequestID: "r", ClientRequestID: "a\x00b", At: time.Now()},
		"time too late": {ID: "use_bad", RequestID: "r", At: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		err := s.AppendUsageBatch(ctx, []ledger.UsageRecord{good, bad})
		if !errors.Is(err, ledger.ErrRefused) {
			t.Errorf("%s: AppendUsageBatch = %v, want an error that is ledger.ErrRefused", name, err)
		}
		if err := s.AppendUsage(ctx, bad); !errors.Is(err, ledger.ErrRefused) {
			t.Errorf("%s: AppendUsage = %v, want an error that is ledger.ErrRefused", name, err)
		}
	}
	if n, err := s.ListRequests(ctx, ledger.RequestQuery{Limit: 10}); err != nil || len(n) != 0 {
		t.Errorf("after refused batches: %d records, %v; want none (all or none)", len(n), err)
	}
	s.Close()
	if err := s.AppendUsageBatch(ctx, []ledger.UsageRecord{good}); err == nil || errors.Is(err, ledger.ErrRefused) {
		t.Errorf("AppendUsageBatch on a closed pool = %v, want an error that is no refusal", err)
	}
}

// A capture or usage record PostgreSQL refuses for its content (NUL in
// text, a status out of range, a constraint it breaks) fails its whole
// batch with an error that is ledger.ErrRefused; a store that is away
// fails it with one that is not.
func TestRefusedWritesAreErrRefused(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	// A constraint the schema may one day have: the rule a poison record breaks.
	if _, err := s.pool.Exec(ctx, `ALTER TABLE captures ADD CONSTRAINT not_poison CHECK (model <> 'poison')`); err != nil {
		t.Fatal(err)
	}
	batch := func(spoil func(*ledger.Capture)) []ledger.Capture {
		var cs []ledger.Capture
		for i := range 100 {
			cs = append(cs, ledger.Capture{RequestID: fmt.Sprintf("req-%d", i), Endpoint: "chat.completions", Model: "m",
				Status: 200, At: time.UnixMilli(1_800_000_000_000), Request: "{}", Response: "{}"})
		}
		spoil(&cs[60])
		return cs
	}
	for name, spoil := range map[string]func(*ledger.Capture){
		"NUL":                 func(c *ledger.Capture) { c.Response = "a\x00b" },
		"invalid UTF-8":       func(c *ledger.Capture) { c.Request = "\xc3" },
		"status out of range": func(c *ledger.Capture) { c.Status = 1 << 40 },
		"check constraint":    func(c *ledger.Capture) { c.Model = "poison" },
	} {
		if err := s.SaveCaptures(ctx, batch(spoil)); !errors.Is(err, ledger.ErrRefused) {
			t.Errorf("%s: SaveCaptures = %v, want ErrRefused", name, err)
		}
	}
	if _, err := s.CaptureOf(ctx, "req-0"); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("a capture of a refused batch was kept: %v", err)
	}
	usage := []ledger.UsageRecord{{ID: "use_1", RequestID: "r", Model: "m\x00", At: time.Now()}}
	if err := s.AppendUsageBatch(ctx, usage); !errors.Is(err, ledger.ErrRefused) {
		t.Errorf("AppendUsageBatch with NUL = %v, want ErrRefused", err)
	}
	s.Close()
	if err := s.SaveCaptures(ctx, batch(func(*ledger.Capture) {})); err == nil || errors.Is(err, ledger.ErrRefused) {
		t.Errorf("SaveCaptures to a closed store = %v, want an error that is not ErrRefused", err)
	}
}
