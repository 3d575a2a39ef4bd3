// Package sqlite is the embedded authz.Store: one SQLite file through the
// pure-Go modernc.org/sqlite driver, no cgo.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	driver "modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"modelgate/authz"
	"modelgate/authz/internal/migrate"
	"modelgate/authz/ledger"
)

// migrationFiles are the schema versions, applied in order at Open; the
// last applied version is kept in schema_version. Released files are never
// edited: databases at any earlier version upgrade in place.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Store is an authz.Store backed by SQLite.
type Store struct {
	db  *sql.DB
	now func() time.Time

	// inserts are the usage INSERTs of usageGroups[i] records, prepared
	// at Open.
	inserts [len(usageGroups)]*sql.Stmt
}

// Open opens (creating if needed) the database at path and migrates it.
func Open(ctx context.Context, path string) (*Store, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_pragma=temp_store(MEMORY)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// SQLite has one writer; a small pool avoids lock contention while WAL
	// still lets readers run beside it. The pool keeps its connections, and
	// with them the statements prepared on each.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	s := &Store{db: db, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating %s: %w", path, err)
	}
	for i, n := range usageGroups {
		if s.inserts[i], err = db.PrepareContext(ctx, usageInsert(n)); err != nil {
			s.Close()
			return nil, fmt.Errorf("preparing the usage insert: %w", err)
		}
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var version int
	err = s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = s.db.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`)
	}
	if err != nil {
		return err
	}
	if version > len(ms) {
		return fmt.Errorf("schema version %d is newer than this binary's %d", version, len(ms))
	}
	for _, m := range ms[version:] {
		if err := s.apply(ctx, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// apply runs one migration in a transaction that first claims the version,
// so that a process opening the same file at the same time skips it.
func (s *Store) apply(ctx context.Context, m migrate.Migration) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ? WHERE version = ?`, m.Version, m.Version-1)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err // applied by someone else meanwhile
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error {
	for _, st := range s.inserts {
		if st != nil {
			st.Close()
		}
	}
	return s.db.Close()
}

func (s *Store) update(ctx context.Context, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return authz.ErrNotFound
	}
	return nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// list runs a query and scans every row.
func list[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Times are stored as Unix milliseconds.

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func msPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return new(ms(*t))
}

func nullMS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	return new(fromMS(v.Int64))
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Lists of model ids and of guardrail rule names are stored
// comma-separated; neither holds commas.

func joinNames(names []string) string { return strings.Join(names, ",") }

func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// limitColumns are the nullable limit columns of groups and accounts.
const (
	limitColumns     = `requests_per_minute, tokens_per_minute, tokens_per_day, concurrent_requests`
	limitAssignments = `requests_per_minute = ?, tokens_per_minute = ?, tokens_per_day = ?, concurrent_requests = ?`
)

func limitArgs(l authz.Limits) []any {
	return []any{l.RequestsPerMinute, l.TokensPerMinute, l.TokensPerDay, l.ConcurrentRequests}
}

// limits scans limitColumns.
type limits [4]sql.NullInt64

func (l limits) Limits() authz.Limits {
	p := func(v sql.NullInt64) *int64 {
		if !v.Valid {
			return nil
		}
		return new(v.Int64)
	}
	return authz.Limits{RequestsPerMinute: p(l[0]), TokensPerMinute: p(l[1]), TokensPerDay: p(l[2]), ConcurrentRequests: p(l[3])}
}

// refused marks the error of a write ledger.ErrRefused when SQLite
// refused the data for its content: a constraint the row breaks
// (SQLITE_CONSTRAINT, RAISE(ABORT) in a trigger among them), a string or
// blob over its size limit (SQLITE_TOOBIG), or a value of the wrong type
// (SQLITE_MISMATCH). Other errors (a busy or read-only database, a full
// disk, I/O) are the store's, not the data's, and pass unchanged.
func refused(err error) error {
	var e *driver.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff { // the primary code of an extended one
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
			return fmt.Errorf("%w: %w", ledger.ErrRefused, err)
		}
	}
	return err
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func isForeignKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FOREIGN KEY constraint failed")
}

// exists turns a unique violation into authz.ErrExists.
func exists(err error, what, id string) error {
	if isUnique(err) {
		return fmt.Errorf("%s %q: %w", what, id, authz.ErrExists)
	}
	return err
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return authz.ErrNotFound
	}
	return err
}

// The store implements every storage interface of authz (authz.Store
// embeds them all).
var _ authz.Store = (*Store)(nil)
