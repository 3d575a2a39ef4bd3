// Package postgres is the authz.Store shared by gateway replicas: PostgreSQL
// through pgx, with the schema migrated at Open.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"modelgate/authz"
	"modelgate/authz/internal/migrate"
	"modelgate/authz/ledger"
)

// migrationFiles are the schema versions, applied in order at Open and
// recorded in schema_migrations. Released files are never edited.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Store is an authz.Store backed by PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// Open connects to the database at url (a postgres:// URL or key=value
// string, as libpq takes; pool_max_conns sets the pool size, default the
// larger of 4 and the CPU count) and migrates its schema, the first in the
// search_path. It fails when the database cannot be reached.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing the PostgreSQL URL: %w", err)
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: p, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("migrating %s@%s/%s: %w", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	return s, nil
}

// migrate applies the missing migrations in one transaction under an
// advisory lock, so that replicas starting together apply each once.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('modelgate.migrate.' || current_schema()))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var version int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
			return err
		}
		if version > len(ms) {
			return fmt.Errorf("schema version %d is newer than this binary's %d", version, len(ms))
		}
		for _, m := range ms[version:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes the store's connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// update runs an UPDATE of one row by id: ErrNotFound if none matched.
func (s *Store) update(ctx context.Context, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return authz.ErrNotFound
	}
	return nil
}

// row runs a query of one row and scans it; no row is ErrNotFound.
func (s *Store) row(ctx context.Context, scan func(pgx.Row) error, sql string, args ...any) error {
	return notFound(scan(s.pool.QueryRow(ctx, sql, args...)))
}

// list runs a query and scans every row.
func list[T any](ctx context.Context, s *Store, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
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

// SQLSTATE codes the store maps to authz errors.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// refused marks the error of a write ledger.ErrRefused when PostgreSQL
// refused the data for its content: a data exception (SQLSTATE class 22:
// bytes invalid in UTF-8, NUL in text, a value out of range), an
// integrity constraint violation (23), or a program limit exceeded (54:
// a value or a statement too large, which a smaller batch may not be).
// Other errors (connection, timeout, shutdown, lack of resources) are
// the store's, not the data's, and pass unchanged.
func refused(err error) error {
	switch code := pgCode(err); {
	case len(code) != 5:
	case code[:2] == "22", code[:2] == "23", code[:2] == "54":
		return fmt.Errorf("%w: %w", ledger.ErrRefused, err)
	}
	return err
}

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return authz.ErrNotFound
	}
	return err
}

// exists turns a unique violation into authz.ErrExists.
func exists(err error, what, id string) error {
	if pgCode(err) == uniqueViolation {
		return fmt.Errorf("%s %q: %w", what, id, authz.ErrExists)
	}
	return err
}

// Times are kept to the millisecond, as in the SQLite store.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func msPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return new(ms(*t))
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return new(t.UTC())
}

// Lists of model ids and of guardrail rule names are text[]; nil and
// empty are the same (no restriction, no rule added), read back as nil.
func namesArg(names []string) []string {
	if names == nil {
		return []string{}
	}
	return names
}

func namesOf(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	return names
}

// limitColumns are the nullable limit columns of groups and accounts.
const limitColumns = `requests_per_minute, tokens_per_minute, tokens_per_day, concurrent_requests`

func limitArgs(l authz.Limits) []any {
	return []any{l.RequestsPerMinute, l.TokensPerMinute, l.TokensPerDay, l.ConcurrentRequests}
}

func limitDests(l *authz.Limits) []any {
	return []any{&l.RequestsPerMinute, &l.TokensPerMinute, &l.TokensPerDay, &l.ConcurrentRequests}
}
