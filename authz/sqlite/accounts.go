package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
)

const accountColumns = `id, name, group_id, models, guardrails, disabled, ` + limitColumns + `, budget, created_at`

// CreateAccount implements authz.Accounts.
func (s *Store) CreateAccount(ctx context.Context, name string) (authz.Account, error) {
	a := authz.Account{ID: storesql.NewID("acct"), Name: name, CreatedAt: ms(s.now())}
	_, err := s.db.ExecContext(ctx, `INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)`,
		a.ID, a.Name, a.CreatedAt.UnixMilli())
	if isUnique(err) {
		return authz.Account{}, fmt.Errorf("account %q: %w", name, authz.ErrExists)
	}
	return a, err
}

// AccountByID implements authz.Accounts.
func (s *Store) AccountByID(ctx context.Context, id string) (authz.Account, error) {
	a, err := scanAccount(s.db.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE id = ?`, id))
	return a, notFound(err)
}

// AccountByName implements authz.Accounts.
func (s *Store) AccountByName(ctx context.Context, name string) (authz.Account, error) {
	a, err := scanAccount(s.db.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = ?`, name))
	return a, notFound(err)
}

// ListAccounts implements authz.Accounts.
func (s *Store) ListAccounts(ctx context.Context) ([]authz.Account, error) {
	return list(ctx, s, scanAccount, `SELECT `+accountColumns+` FROM accounts ORDER BY name`)
}

// UpdateAccount implements authz.Accounts.
func (s *Store) UpdateAccount(ctx context.Context, a authz.Account) error {
	err := s.update(ctx, `UPDATE accounts SET name = ?, group_id = ?, models = ?, guardrails = ?, disabled = ?, `+limitAssignments+`, budget = ? WHERE id = ?`,
		append([]any{a.Name, nullString(a.GroupID), joinNames(a.Models), joinNames(a.Guardrails), a.Disabled}, append(limitArgs(a.Limits), storesql.BudgetArg(a.Budget), a.ID)...)...)
	switch {
	case isUnique(err):
		return fmt.Errorf("account %q: %w", a.Name, authz.ErrExists)
	case isForeignKey(err):
		return fmt.Errorf("group %q: %w", a.GroupID, authz.ErrNotFound)
	}
	return err
}

// SetAccountDisabled implements authz.Accounts.
func (s *Store) SetAccountDisabled(ctx context.Context, id string, disabled bool) error {
	return s.update(ctx, `UPDATE accounts SET disabled = ? WHERE id = ?`, disabled, id)
}

func scanAccount(row scanner) (authz.Account, error) {
	var a authz.Account
	var group sql.NullString
	var models, guardrails string
	var lim limits
	var created int64
	if err := row.Scan(&a.ID, &a.Name, &group, &models, &guardrails, &a.Disabled, &lim[0], &lim[1], &lim[2], &lim[3], storesql.BudgetDest(&a.Budget), &created); err != nil {
		return authz.Account{}, err
	}
	a.GroupID, a.Models, a.Guardrails = group.String, splitNames(models), splitNames(guardrails)
	a.Limits, a.CreatedAt = lim.Limits(), fromMS(created)
	return a, nil
}
