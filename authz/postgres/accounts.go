package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
)

const accountColumns = `id, name, group_id, models, guardrails, disabled, ` + limitColumns + `, budget, created_at`

// CreateAccount implements authz.Accounts.
func (s *Store) CreateAccount(ctx context.Context, name string) (authz.Account, error) {
	a := authz.Account{ID: storesql.NewID("acct"), Name: name, CreatedAt: ms(s.now())}
	_, err := s.pool.Exec(ctx, `INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3)`, a.ID, a.Name, a.CreatedAt)
	if err != nil {
		return authz.Account{}, exists(err, "account", name)
	}
	return a, nil
}

// AccountByID implements authz.Accounts.
func (s *Store) AccountByID(ctx context.Context, id string) (authz.Account, error) {
	return s.account(ctx, `SELECT `+accountColumns+` FROM accounts WHERE id = $1`, id)
}

// AccountByName implements authz.Accounts.
func (s *Store) AccountByName(ctx context.Context, name string) (authz.Account, error) {
	return s.account(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = $1`, name)
}

// ListAccounts implements authz.Accounts.
func (s *Store) ListAccounts(ctx context.Context) ([]authz.Account, error) {
	return list(ctx, s, scanAccount, `SELECT `+accountColumns+` FROM accounts ORDER BY name`)
}

// UpdateAccount implements authz.Accounts.
func (s *Store) UpdateAccount(ctx context.Context, a authz.Account) error {
	var group *string
	if a.GroupID != "" {
		group = &a.GroupID
	}
	err := s.update(ctx, `UPDATE accounts SET name = $2, group_id = $3, models = $4, guardrails = $5, disabled = $6,
		requests_per_minute = $7, tokens_per_minute = $8, tokens_per_day = $9, concurrent_requests = $10, budget = $11 WHERE id = $1`,
		append([]any{a.ID, a.Name, group, namesArg(a.Models), namesArg(a.Guardrails), a.Disabled}, append(limitArgs(a.Limits), storesql.BudgetArg(a.Budget))...)...)
	switch pgCode(err) {
	case uniqueViolation:
		return fmt.Errorf("account %q: %w", a.Name, authz.ErrExists)
	case foreignKeyViolation:
		return fmt.Errorf("group %q: %w", a.GroupID, authz.ErrNotFound)
	}
	return err
}

// SetAccountDisabled implements authz.Accounts.
func (s *Store) SetAccountDisabled(ctx context.Context, id string, disabled bool) error {
	return s.update(ctx, `UPDATE accounts SET disabled = $2 WHERE id = $1`, id, disabled)
}

func (s *Store) account(ctx context.Context, sql, arg string) (authz.Account, error) {
	var a authz.Account
	err := s.row(ctx, func(row pgx.Row) (err error) { a, err = scanAccount(row); return err }, sql, arg)
	return a, err
}

func scanAccount(row pgx.Row) (authz.Account, error) {
	var a authz.Account
	var group *string
	dests := append([]any{&a.ID, &a.Name, &group, &a.Models, &a.Guardrails, &a.Disabled}, append(limitDests(&a.Limits), storesql.BudgetDest(&a.Budget), &a.CreatedAt)...)
	if err := row.Scan(dests...); err != nil {
		return authz.Account{}, err
	}
	if group != nil {
		a.GroupID = *group
	}
	a.Models, a.Guardrails, a.CreatedAt = namesOf(a.Models), namesOf(a.Guardrails), a.CreatedAt.UTC()
	return a, nil
}
