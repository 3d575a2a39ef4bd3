package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// ListPrices implements authz.Prices.
func (s *Store) ListPrices(ctx context.Context) ([]pricing.Price, error) {
	return list(ctx, s, func(row pgx.Row) (pricing.Price, error) {
		var text string
		if err := row.Scan(&text); err != nil {
			return pricing.Price{}, err
		}
		return storesql.ScanPrice(text)
	}, `SELECT price FROM prices ORDER BY model, from_ms`)
}

// SetPrice implements authz.Prices.
func (s *Store) SetPrice(ctx context.Context, p pricing.Price) error {
	text, err := storesql.PriceArg(p)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO prices (model, from_ms, price) VALUES ($1, $2, $3)
		ON CONFLICT (model, from_ms) DO UPDATE SET price = excluded.price`, p.Model, storesql.FromMS(p.From), text)
	return err
}

// DeletePrice implements authz.Prices.
func (s *Store) DeletePrice(ctx context.Context, model string, from time.Time) error {
	return s.update(ctx, `DELETE FROM prices WHERE model = $1 AND from_ms = $2`, model, storesql.FromMS(from))
}

// AppendAudit implements authz.Audit.
func (s *Store) AppendAudit(ctx context.Context, e authz.AuditEntry) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO audit (at, actor, action, target, before, after) VALUES ($1, $2, $3, $4, $5, $6)`,
		ms(e.At), e.Actor, e.Action, e.Target, storesql.NullJSON(e.Before), storesql.NullJSON(e.After))
	return err
}

// ListAudit implements authz.Audit.
func (s *Store) ListAudit(ctx context.Context, q authz.AuditQuery) ([]authz.AuditEntry, error) {
	before := q.Before
	if before <= 0 {
		before = 1 << 62
	}
	return list(ctx, s, func(row pgx.Row) (authz.AuditEntry, error) {
		var e authz.AuditEntry
		var b, a *string
		if err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Target, &b, &a); err != nil {
			return e, err
		}
		e.At, e.Before, e.After = e.At.UTC(), storesql.JSONOf(b), storesql.JSONOf(a)
		return e, nil
	}, `SELECT id, at, actor, action, target, before, after FROM audit
		WHERE id < $1 AND ($2 = '' OR target = $2) ORDER BY id DESC LIMIT $3`, before, q.Target, storesql.AuditLimit(q))
}

// DeleteUsageBefore implements ledger.UsageStore.
func (s *Store) DeleteUsageBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.deleteBefore(ctx, "usage", before, limit)
}

// deleteBefore deletes at most limit rows of a table with an at column,
// oldest first, from before before.
func (s *Store) deleteBefore(ctx context.Context, table string, before time.Time, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+table+` WHERE ctid IN (SELECT ctid FROM `+table+` WHERE at < $1 ORDER BY at LIMIT $2)`,
		before, limit)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// ListRequests implements ledger.UsageStore.
func (s *Store) ListRequests(ctx context.Context, q ledger.RequestQuery) ([]ledger.UsageRecord, error) {
	query, args := dialect.Requests(q)
	return list(ctx, s, func(row pgx.Row) (ledger.UsageRecord, error) {
		var r ledger.UsageRecord
		var cost storesql.NullCost
		var duration int64
		if err := row.Scan(append(storesql.RequestDest(&r, &cost, &duration), &r.At)...); err != nil {
			return r, err
		}
		r.Cost, r.CostKnown, r.Duration, r.At = pricing.Nanos(cost.N), cost.Valid, time.Duration(duration)*time.Millisecond, r.At.UTC()
		return r, nil
	}, query, args...)
}
