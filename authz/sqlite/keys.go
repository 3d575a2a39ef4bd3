package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
)

const keyColumns = `id, account_id, name, prefix, hash, models, guardrails, disabled, expires_at, revoked_at, created_at, last_used_at, budget`

// CreateKey implements authz.Keys.
func (s *Store) CreateKey(ctx context.Context, k authz.Key) (authz.Key, error) {
	if k.ID == "" {
		k.ID = storesql.NewID("key")
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now()
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt, k.LastUsedAt = ms(k.CreatedAt), msPtr(k.ExpiresAt), nil, nil
	_, err := s.db.ExecContext(ctx, `INSERT INTO keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL, ?)`,
		k.ID, k.AccountID, k.Name, k.Prefix, k.Hash[:], joinNames(k.Models), joinNames(k.Guardrails), k.Disabled, nullMS(k.ExpiresAt),
		k.CreatedAt.UnixMilli(), storesql.BudgetArg(k.Budget))
	switch {
	case isUnique(err):
		return authz.Key{}, fmt.Errorf("key: %w", authz.ErrExists)
	case isForeignKey(err):
		return authz.Key{}, fmt.Errorf("account %q: %w", k.AccountID, authz.ErrNotFound)
	}
	return k, err
}

// KeyByHash implements authz.Keys.
func (s *Store) KeyByHash(ctx context.Context, hash [32]byte) (authz.Key, error) {
	return s.key(ctx, `SELECT `+keyColumns+` FROM keys WHERE hash = ?`, hash[:])
}

// KeyByID implements authz.Keys.
func (s *Store) KeyByID(ctx context.Context, id string) (authz.Key, error) {
	return s.key(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, id)
}

// KeyByPrefix implements authz.Keys. A prefix shared by several keys is
// ambiguous and returns an error rather than picking one.
func (s *Store) KeyByPrefix(ctx context.Context, prefix string) (authz.Key, error) {
	keys, err := list(ctx, s, scanKey, `SELECT `+keyColumns+` FROM keys WHERE prefix = ? ORDER BY created_at, rowid`, prefix)
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

// ListKeys implements authz.Keys.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]authz.Key, error) {
	return list(ctx, s, scanKey, `SELECT `+keyColumns+` FROM keys WHERE account_id = ? ORDER BY created_at, rowid`, accountID)
}

// UpdateKey implements authz.Keys.
func (s *Store) UpdateKey(ctx context.Context, k authz.Key) error {
	return s.update(ctx, `UPDATE keys SET name = ?, models = ?, guardrails = ?, disabled = ?, expires_at = ?, budget = ? WHERE id = ?`,
		k.Name, joinNames(k.Models), joinNames(k.Guardrails), k.Disabled, nullMS(k.ExpiresAt), storesql.BudgetArg(k.Budget), k.ID)
}

// SetKeyDisabled implements authz.Keys.
func (s *Store) SetKeyDisabled(ctx context.Context, id string, disabled bool) error {
	return s.update(ctx, `UPDATE keys SET disabled = ? WHERE id = ?`, disabled, id)
}

// RevokeKey implements authz.Keys.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	return s.update(ctx, `UPDATE keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, s.now().UnixMilli(), id)
}

// TouchKey implements authz.Keys.
func (s *Store) TouchKey(ctx context.Context, id string, at time.Time) error {
	return s.update(ctx, `UPDATE keys SET last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE id = ?`, at.UnixMilli(), id)
}

func (s *Store) key(ctx context.Context, query string, arg any) (authz.Key, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, query, arg))
	return k, notFound(err)
}

func scanKey(row scanner) (authz.Key, error) {
	var k authz.Key
	var hash []byte
	var models, guardrails string
	var expires, revoked, lastUsed sql.NullInt64
	var created int64
	if err := row.Scan(&k.ID, &k.AccountID, &k.Name, &k.Prefix, &hash, &models, &guardrails, &k.Disabled, &expires, &revoked,
		&created, &lastUsed, storesql.BudgetDest(&k.Budget)); err != nil {
		return authz.Key{}, err
	}
	copy(k.Hash[:], hash)
	k.Models, k.Guardrails = splitNames(models), splitNames(guardrails)
	k.ExpiresAt, k.RevokedAt, k.LastUsedAt = fromNullMS(expires), fromNullMS(revoked), fromNullMS(lastUsed)
	k.CreatedAt = fromMS(created)
	return k, nil
}
