package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"modelgate/authz"
)

const keyColumns = `id, account_id, name, prefix, hash, models, disabled, revoked_at, created_at`

// CreateKey implements authz.Store.
func (s *Store) CreateKey(ctx context.Context, k authz.Key) (authz.Key, error) {
	if k.ID == "" {
		k.ID = newID("key")
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?)`,
		k.ID, k.AccountID, k.Name, k.Prefix, k.Hash[:], strings.Join(k.Models, ","), k.Disabled, k.CreatedAt.UnixMilli())
	switch {
	case isUnique(err):
		return authz.Key{}, fmt.Errorf("key: %w", authz.ErrExists)
	case isForeignKey(err):
		return authz.Key{}, fmt.Errorf("account %q: %w", k.AccountID, authz.ErrNotFound)
	}
	return k, err
}

// KeyByHash implements authz.Store.
func (s *Store) KeyByHash(ctx context.Context, hash [32]byte) (authz.Key, error) {
	return s.key(ctx, `SELECT `+keyColumns+` FROM keys WHERE hash = ?`, hash[:])
}

// KeyByID implements authz.Store.
func (s *Store) KeyByID(ctx context.Context, id string) (authz.Key, error) {
	return s.key(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, id)
}

// KeyByPrefix implements authz.Store. A prefix shared by several keys is
// ambiguous and returns an error rather than picking one.
func (s *Store) KeyByPrefix(ctx context.Context, prefix string) (authz.Key, error) {
	keys, err := s.keys(ctx, `SELECT `+keyColumns+` FROM keys WHERE prefix = ? ORDER BY created_at`, prefix)
	switch {
	case err != nil:
		return authz.Key{}, err
	case len(keys) == 0:
		return authz.Key{}, authz.ErrNotFound
	case len(keys) > 1:
		return authz.Key{}, fmt.Errorf("prefix %q matches %d keys; use the key id", prefix, len(keys))
	}
	return keys[0], nil
}

// ListKeys implements authz.Store.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]authz.Key, error) {
	return s.keys(ctx, `SELECT `+keyColumns+` FROM keys WHERE account_id = ? ORDER BY created_at, id`, accountID)
}

// SetKeyDisabled implements authz.Store.
func (s *Store) SetKeyDisabled(ctx context.Context, id string, disabled bool) error {
	return s.update(ctx, `UPDATE keys SET disabled = ? WHERE id = ?`, disabled, id)
}

// RevokeKey implements authz.Store.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	return s.update(ctx, `UPDATE keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, s.now().UnixMilli(), id)
}

func (s *Store) key(ctx context.Context, query string, arg any) (authz.Key, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, query, arg))
	return k, notFound(err)
}

func (s *Store) keys(ctx context.Context, query string, arg any) ([]authz.Key, error) {
	rows, err := s.db.QueryContext(ctx, query, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []authz.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

func scanKey(row interface{ Scan(...any) error }) (authz.Key, error) {
	var k authz.Key
	var hash []byte
	var models string
	var revoked sql.NullInt64
	var created int64
	if err := row.Scan(&k.ID, &k.AccountID, &k.Name, &k.Prefix, &hash, &models, &k.Disabled, &revoked, &created); err != nil {
		return authz.Key{}, err
	}
	copy(k.Hash[:], hash)
	if models != "" {
		k.Models = strings.Split(models, ",")
	}
	if revoked.Valid {
		t := time.UnixMilli(revoked.Int64).UTC()
		k.RevokedAt = &t
	}
	k.CreatedAt = time.UnixMilli(created).UTC()
	return k, nil
}
