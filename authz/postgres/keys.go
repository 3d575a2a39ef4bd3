package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	_, err := s.pool.Exec(ctx, `INSERT INTO keys (id, account_id, name, prefix, hash, models, guardrails, disabled, expires_at, created_at, budget)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		k.ID, k.AccountID, k.Name, k.Prefix, k.Hash[:], namesArg(k.Models), namesArg(k.Guardrails), k.Disabled, k.ExpiresAt,
		k.CreatedAt, storesql.BudgetArg(k.Budget))
	switch pgCode(err) {
	case "":
		return k, err
	case uniqueViolation:
		return authz.Key{}, fmt.Errorf("key: %w", authz.ErrExists)
	case foreignKeyViolation:
		return authz.Key{}, fmt.Errorf("account %q: %w", k.AccountID, authz.ErrNotFound)
	}
	return authz.Key{}, err
}

// KeyByHash implements authz.Keys.
func (s *Store) KeyByHash(ctx context.Context, hash [32]byte) (authz.Key, error) {
	return s.key(ctx, `SELECT `+keyColumns+` FROM keys WHERE hash = $1`, hash[:])
}

// KeyByID implements authz.Keys.
func (s *Store) KeyByID(ctx context.Context, id string) (authz.Key, error) {
	return s.key(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = $1`, id)
}

// KeyByPrefix implements authz.Keys. A prefix shared by several keys is
// ambiguous and returns an error rather than picking one.
func (s *Store) KeyByPrefix(ctx context.Context, prefix string) (authz.Key, error) {
	keys, err := list(ctx, s, scanKey, `SELECT `+keyColumns+` FROM keys WHERE prefix = $1 ORDER BY created_at, seq LIMIT 2`, prefix)
	switch {
	case err != nil:
		return authz.Key{}, err
	case len(keys) == 0:
		return authz.Key{}, authz.ErrNotFound
	case len(keys) > 1:
		return authz.Key{}, fmt.Errorf("prefix %q matches several keys; use the key id", prefix)
	}
	return keys[0], nil
}

// ListKeys implements authz.Keys.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]authz.Key, error) {
	return list(ctx, s, scanKey, `SELECT `+keyColumns+` FROM keys WHERE account_id = $1 ORDER BY created_at, seq`, accountID)
}

// UpdateKey implements authz.Keys.
func (s *Store) UpdateKey(ctx context.Context, k authz.Key) error {
	return s.update(ctx, `UPDATE keys SET name = $2, models = $3, guardrails = $4, disabled = $5, expires_at = $6, budget = $7
		WHERE id = $1`,
		k.ID, k.Name, namesArg(k.Models), namesArg(k.Guardrails), k.Disabled, msPtr(k.ExpiresAt), storesql.BudgetArg(k.Budget))
}

// SetKeyDisabled implements authz.Keys.
func (s *Store) SetKeyDisabled(ctx context.Context, id string, disabled bool) error {
	return s.update(ctx, `UPDATE keys SET disabled = $2 WHERE id = $1`, id, disabled)
}

// RevokeKey implements authz.Keys.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	return s.update(ctx, `UPDATE keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1`, id, ms(s.now()))
}

// TouchKey implements authz.Keys.
func (s *Store) TouchKey(ctx context.Context, id string, at time.Time) error {
	// GREATEST ignores NULL: the first use is recorded as is.
	return s.update(ctx, `UPDATE keys SET last_used_at = GREATEST(last_used_at, $2) WHERE id = $1`, id, ms(at))
}

func (s *Store) key(ctx context.Context, sql string, arg any) (authz.Key, error) {
	var k authz.Key
	err := s.row(ctx, func(row pgx.Row) (err error) { k, err = scanKey(row); return err }, sql, arg)
	return k, err
}

func scanKey(row pgx.Row) (authz.Key, error) {
	var k authz.Key
	var hash []byte
	if err := row.Scan(&k.ID, &k.AccountID, &k.Name, &k.Prefix, &hash, &k.Models, &k.Guardrails, &k.Disabled, &k.ExpiresAt, &k.RevokedAt,
		&k.CreatedAt, &k.LastUsedAt, storesql.BudgetDest(&k.Budget)); err != nil {
		return authz.Key{}, err
	}
	copy(k.Hash[:], hash)
	k.Models, k.Guardrails, k.CreatedAt = namesOf(k.Models), namesOf(k.Guardrails), k.CreatedAt.UTC()
	k.ExpiresAt, k.RevokedAt, k.LastUsedAt = utcPtr(k.ExpiresAt), utcPtr(k.RevokedAt), utcPtr(k.LastUsedAt)
	return k, nil
}
