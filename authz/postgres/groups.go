package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

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
	_, err := s.pool.Exec(ctx, `INSERT INTO groups (`+groupColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		append([]any{g.ID, g.Name, namesArg(g.Models), namesArg(g.Guardrails)}, append(limitArgs(g.Limits), storesql.BudgetArg(g.Budget), g.CreatedAt)...)...)
	if err != nil {
		return authz.Group{}, exists(err, "group", g.Name)
	}
	return g, nil
}

// GroupByID implements authz.Groups.
func (s *Store) GroupByID(ctx context.Context, id string) (authz.Group, error) {
	return s.group(ctx, `SELECT `+groupColumns+` FROM groups WHERE id = $1`, id)
}

// GroupByName implements authz.Groups.
func (s *Store) GroupByName(ctx context.Context, name string) (authz.Group, error) {
	return s.group(ctx, `SELECT `+groupColumns+` FROM groups WHERE name = $1`, name)
}

// ListGroups implements authz.Groups.
func (s *Store) ListGroups(ctx context.Context) ([]authz.Group, error) {
	return list(ctx, s, scanGroup, `SELECT `+groupColumns+` FROM groups ORDER BY name`)
}

// UpdateGroup implements authz.Groups.
func (s *Store) UpdateGroup(ctx context.Context, g authz.Group) error {
	err := s.update(ctx, `UPDATE groups SET name = $2, models = $3, guardrails = $4, requests_per_minute = $5,
		tokens_per_minute = $6, tokens_per_day = $7, concurrent_requests = $8, budget = $9 WHERE id = $1`,
		append([]any{g.ID, g.Name, namesArg(g.Models), namesArg(g.Guardrails)}, append(limitArgs(g.Limits), storesql.BudgetArg(g.Budget))...)...)
	if pgCode(err) == uniqueViolation {
		return fmt.Errorf("group %q: %w", g.Name, authz.ErrExists)
	}
	return err
}

func (s *Store) group(ctx context.Context, sql string, arg string) (authz.Group, error) {
	var g authz.Group
	err := s.row(ctx, func(row pgx.Row) (err error) { g, err = scanGroup(row); return err }, sql, arg)
	return g, err
}

func scanGroup(row pgx.Row) (authz.Group, error) {
	var g authz.Group
	dests := append([]any{&g.ID, &g.Name, &g.Models, &g.Guardrails}, append(limitDests(&g.Limits), storesql.BudgetDest(&g.Budget), &g.CreatedAt)...)
	if err := row.Scan(dests...); err != nil {
		return authz.Group{}, err
	}
	g.Models, g.Guardrails, g.CreatedAt = namesOf(g.Models), namesOf(g.Guardrails), g.CreatedAt.UTC()
	return g, nil
}
