package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"modelgate/authz"
)

// CreateAccount implements authz.Store.
func (s *Store) CreateAccount(ctx context.Context, name string) (authz.Account, error) {
	a := authz.Account{ID: newID("acct"), Name: name, CreatedAt: s.now().UTC().Truncate(time.Millisecond)}
	_, err := s.db.ExecContext(ctx, `INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)`,
		a.ID, a.Name, a.CreatedAt.UnixMilli())
	if isUnique(err) {
		return authz.Account{}, fmt.Errorf("account %q: %w", name, authz.ErrExists)
	}
	return a, err
}

// AccountByID implements authz.Store.
func (s *Store) AccountByID(ctx context.Context, id string) (authz.Account, error) {
	return s.account(ctx, `SELECT id, name, disabled, created_at FROM accounts WHERE id = ?`, id)
}

// AccountByName implements authz.Store.
func (s *Store) AccountByName(ctx context.Context, name string) (authz.Account, error) {
	return s.account(ctx, `SELECT id, name, disabled, created_at FROM accounts WHERE name = ?`, name)
}

func (s *Store) account(ctx context.Context, query, arg string) (authz.Account, error) {
	var a authz.Account
	var created int64
	err := s.db.QueryRowContext(ctx, query, arg).Scan(&a.ID, &a.Name, &a.Disabled, &created)
	if err != nil {
		return authz.Account{}, notFound(err)
	}
	a.CreatedAt = time.UnixMilli(created).UTC()
	return a, nil
}

// SetAccountDisabled implements authz.Store.
func (s *Store) SetAccountDisabled(ctx context.Context, id string, disabled bool) error {
	return s.update(ctx, `UPDATE accounts SET disabled = ? WHERE id = ?`, disabled, id)
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

// AppendUsage implements authz.Store.
func (s *Store) AppendUsage(ctx context.Context, r authz.UsageRecord) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO usage (request_id, key_id, account_id, endpoint, model, backend,
		status, prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens, duration_ms, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.RequestID, r.KeyID, r.AccountID, r.Endpoint, r.Model, r.Backend, r.Status, r.PromptTokens,
		r.CompletionTokens, r.TotalTokens, r.CachedTokens, r.ReasoningTokens, r.Duration.Milliseconds(), r.At.UnixMilli())
	return err
}

// UsageSince implements authz.Store.
func (s *Store) UsageSince(ctx context.Context, accountID string, since time.Time) (authz.UsageTotals, error) {
	var t authz.UsageTotals
	var p, c, tot sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(total_tokens)
		FROM usage WHERE account_id = ? AND at >= ?`, accountID, since.UnixMilli()).Scan(&t.Requests, &p, &c, &tot)
	t.PromptTokens, t.CompletionTokens, t.TotalTokens = p.Int64, c.Int64, tot.Int64
	return t, err
}
