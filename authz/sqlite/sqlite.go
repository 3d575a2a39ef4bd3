// Package sqlite is the embedded authz.Store: one SQLite file through the
// pure-Go modernc.org/sqlite driver, no cgo.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"modelgate/authz"
)

// migrations are applied in order; the index of the last applied one is
// kept in schema_version.
var migrations = []string{`
CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	disabled   INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL
);
CREATE TABLE keys (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts(id),
	name       TEXT NOT NULL DEFAULT '',
	prefix     TEXT NOT NULL,
	hash       BLOB NOT NULL UNIQUE,
	models     TEXT NOT NULL DEFAULT '',
	disabled   INTEGER NOT NULL DEFAULT 0,
	revoked_at INTEGER,
	created_at INTEGER NOT NULL
);
CREATE INDEX keys_prefix ON keys(prefix);
CREATE INDEX keys_account ON keys(account_id);
CREATE TABLE usage (
	request_id        TEXT NOT NULL,
	key_id            TEXT NOT NULL,
	account_id        TEXT NOT NULL,
	endpoint          TEXT NOT NULL,
	model             TEXT NOT NULL,
	backend           TEXT NOT NULL,
	status            INTEGER NOT NULL,
	prompt_tokens     INTEGER NOT NULL,
	completion_tokens INTEGER NOT NULL,
	total_tokens      INTEGER NOT NULL,
	cached_tokens     INTEGER NOT NULL,
	reasoning_tokens  INTEGER NOT NULL,
	duration_ms       INTEGER NOT NULL,
	at                INTEGER NOT NULL
);
CREATE INDEX usage_account_at ON usage(account_id, at);
`, `
CREATE TABLE responses (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL,
	items      BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX responses_expires ON responses(expires_at);
`, `
CREATE TABLE images (
	id           TEXT PRIMARY KEY,
	account_id   TEXT NOT NULL,
	content_type TEXT NOT NULL,
	data         BLOB NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL
);
CREATE INDEX images_expires ON images(expires_at);
`}

// Store is an authz.Store backed by SQLite.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

// Open opens (creating if needed) the database at path and migrates it.
func Open(ctx context.Context, path string) (*Store, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// SQLite has one writer; a small pool avoids lock contention while WAL
	// still lets readers run beside it.
	db.SetMaxOpenConns(4)
	s := &Store{db: db, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var version int
	err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = s.db.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`)
	}
	if err != nil {
		return err
	}
	for i := version; i < len(migrations); i++ {
		if err := s.apply(ctx, i); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return nil
}

func (s *Store) apply(ctx context.Context, i int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, i+1); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func newID(kind string) string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	return kind + "_" + hex.EncodeToString(b[:])
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func isForeignKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FOREIGN KEY constraint failed")
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return authz.ErrNotFound
	}
	return err
}

var _ authz.Store = (*Store)(nil)
