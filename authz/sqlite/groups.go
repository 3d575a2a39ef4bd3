package sqlite

import (
	"context"
	"fmt"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
)

const groupColumns = `id, name, models, guardrails, ` + limitColumns + `, budget, created_at`

// CreateGroup implements authz.Groups.
func (s *Store) CreateGroup(ctx context.Context, g authz.Group) (authz.Group, error) {
	if g.ID == "" {
		g.ID = storesql.NewID("grp")
	}
	if g.CreatedAt.IsZero() {
		g.CreatedAt = s.now()
	}
	g.CreatedAt = ms(g.CreatedAt)
	_, err := s.db.ExecContext(ctx, `INSERT INTO groups (`+groupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{g.ID, g.Name, joinNames(g.Models), joinNames(g.Guardrails)}, append(limitArgs(g.Limits), storesql.BudgetArg(g.Budget), g.CreatedAt.UnixMilli())...)...)
	if isUnique(err) {
		return authz.Group{}, fmt.Errorf("group %q: %w", g.Name, authz.ErrExists)
	}
	return g, err
}

// GroupByID implements authz.Groups.
func (s *Store) GroupByID(ctx context.Context, id string) (authz.Group, error) {
	g, err := scanGroup(s.db.QueryRowContext(ctx, `SELECT `+groupColumns+` FROM groups WHERE id = ?`, id))
	return g, notFound(err)
}

// GroupByName implements authz.Groups.
func (s *Store) GroupByName(ctx context.Context, name string) (authz.Group, error) {
	g, err := scanGroup(s.db.QueryRowContext(ctx, `SELECT `+groupColumns+` FROM groups WHERE name = ?`, name))
	return g, notFound(err)
}

// ListGroups implements authz.Groups.
func (s *Store) ListGroups(ctx context.Context) ([]authz.Group, error) {
	return list(ctx, s, scanGroup, `SELECT `+groupColumns+` FROM groups ORDER BY name`)
}

// UpdateGroup implements authz.Groups.
func (s *Store) UpdateGroup(ctx context.Context, g authz.Group) error {
	err := s.update(ctx, `UPDATE groups SET name = ?, models = ?, guardrails = ?, `+limitAssignments+`, budget = ? WHERE id = ?`,
		append([]any{g.Name, joinNames(g.Models), joinNames(g.Guardrails)}, append(limitArgs(g.Limits), storesql.BudgetArg(g.Budget), g.ID)...)...)
	if isUnique(err) {
		return fmt.Errorf("group %q: %w", g.Name, authz.ErrExists)
	}
	return err
}

func scanGroup(row scanner) (authz.Group, error) {
	var g authz.Group
	var models, guardrails string
	var lim limits
	var created int64
	if err := row.Scan(&g.ID, &g.Name, &models, &guardrails, &lim[0], &lim[1], &lim[2], &lim[3], storesql.BudgetDest(&g.Budget), &created); err != nil {
		return authz.Group{}, err
	}
	g.Models, g.Guardrails, g.Limits, g.CreatedAt = splitNames(models), splitNames(guardrails), lim.Limits(), fromMS(created)
	return g, nil
}
