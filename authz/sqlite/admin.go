package sqlite

import (
	"context"
	"time"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// ListPrices implements authz.Prices.
func (s *Store) ListPrices(ctx context.Context) ([]pricing.Price, error) {
	return list(ctx, s, func(row scanner) (pricing.Price, error) {
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
	_, err = s.db.ExecContext(ctx, `INSERT INTO prices (model, from_ms, price) VALUES (?, ?, ?)
		ON CONFLICT (model, from_ms) DO UPDATE SET price = excluded.price`, p.Model, storesql.FromMS(p.From), text)
	return err
}

// DeletePrice implements authz.Prices.
func (s *Store) DeletePrice(ctx context.Context, model string, from time.Time) error {
	return s.update(ctx, `DELETE FROM prices WHERE model = ? AND from_ms = ?`, model, storesql.FromMS(from))
}

// AppendAudit implements authz.Audit.
func (s *Store) AppendAudit(ctx context.Context, e authz.AuditEntry) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO audit (at, actor, action, target, before, after) VALUES (?, ?, ?, ?, ?, ?)`,
		e.At.UnixMilli(), e.Actor, e.Action, e.Target, storesql.NullJSON(e.Before), storesql.NullJSON(e.After))
	return err
}

// ListAudit implements authz.Audit.
func (s *Store) ListAudit(ctx context.Context, q authz.AuditQuery) ([]authz.AuditEntry, error) {
	before := q.Before
	if before <= 0 {
		before = 1 << 62
	}
	return list(ctx, s, func(row scanner) (authz.AuditEntry, error) {
		var e authz.AuditEntry
		var at int64
		var b, a *string
		if err := row.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &b, &a); err != nil {
			return e, err
		}
		e.At, e.Before, e.After = fromMS(at), storesql.JSONOf(b), storesql.JSONOf(a)
		return e, nil
	}, `SELECT id, at, actor, action, target, before, after FROM audit
		WHERE id < ? AND (? = '' OR target = ?) ORDER BY id DESC LIMIT ?`, before, q.Target, q.Target, storesql.AuditLimit(q))
}

// DeleteUsageBefore implements ledger.UsageStore.
func (s *Store) DeleteUsageBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.deleteBefore(ctx, "usage", before, limit)
}

// deleteBefore deletes at most limit rows of a table with an at column,
// oldest first, from before before.
func (s *Store) deleteBefore(ctx context.Context, table string, before time.Time, limit int) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM `+table+` WHERE rowid IN (SELECT rowid FROM `+table+` WHERE at < ? ORDER BY at LIMIT ?)`,
		before.UnixMilli(), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ListRequests implements ledger.UsageStore.
func (s *Store) ListRequests(ctx context.Context, q ledger.RequestQuery) ([]ledger.UsageRecord, error) {
	query, args := dialect.Requests(q)
	return list(ctx, s, func(row scanner) (ledger.UsageRecord, error) {
		var r ledger.UsageRecord
		var cost storesql.NullCost
		var duration, at int64
		if err := row.Scan(append(storesql.RequestDest(&r, &cost, &duration), &at)...); err != nil {
			return r, err
		}
		r.Cost, r.CostKnown, r.Duration, r.At = pricing.Nanos(cost.N), cost.Valid, time.Duration(duration)*time.Millisecond, fromMS(at)
		return r, nil
	}, query, args...)
}
