package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"modelgate/authz"
)

var usageColumns = []string{"record_id", "request_id", "key_id", "account_id", "endpoint", "model", "backend", "status", "prompt_tokens",
	"completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens", "duration_ms", "at"}

// usageSums are the UsageTotals columns of an aggregate over usage.
const usageSums = `COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0),
	COALESCE(SUM(total_tokens), 0), COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(reasoning_tokens), 0)`

func usageValues(r authz.UsageRecord) []any {
	var id *string // NULL when unset: such records may repeat
	if r.ID != "" {
		id = &r.ID
	}
	return []any{id, r.RequestID, r.KeyID, r.AccountID, r.Endpoint, r.Model, r.Backend, int32(r.Status), r.PromptTokens,
		r.CompletionTokens, r.TotalTokens, r.CachedTokens, r.ReasoningTokens, r.Duration.Milliseconds(), ms(r.At)}
}

// AppendUsage implements authz.Store.
func (s *Store) AppendUsage(ctx context.Context, r authz.UsageRecord) error {
	_, err := s.pool.Exec(ctx, insertUsage, usageValues(r)...)
	return err
}

var insertUsage = `INSERT INTO usage (` + strings.Join(usageColumns, ", ") + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT (record_id) DO NOTHING`

// AppendUsageBatch implements authz.Store: one COPY into a temporary
// table, then one INSERT that skips ids already stored, in a transaction.
// (COPY itself cannot skip conflicts.)
func (s *Store) AppendUsageBatch(ctx context.Context, recs []authz.UsageRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE usage_batch (LIKE usage) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"usage_batch"}, usageColumns, pgx.CopyFromSlice(len(recs), func(i int) ([]any, error) {
			return usageValues(recs[i]), nil
		})); err != nil {
			return err
		}
		cols := strings.Join(usageColumns, ", ")
		_, err := tx.Exec(ctx, `INSERT INTO usage (`+cols+`) SELECT `+cols+` FROM usage_batch ON CONFLICT (record_id) DO NOTHING`)
		return err
	})
}

// UsageSince implements authz.Store.
func (s *Store) UsageSince(ctx context.Context, accountID string, since time.Time) (authz.UsageTotals, error) {
	var t authz.UsageTotals
	err := s.row(ctx, func(row pgx.Row) error {
		return row.Scan(&t.Requests, &t.PromptTokens, &t.CompletionTokens, &t.TotalTokens, &t.CachedTokens, &t.ReasoningTokens)
	}, `SELECT `+usageSums+` FROM usage WHERE account_id = $1 AND at >= $2`, accountID, ms(since))
	return t, err
}

// UsageReport implements authz.Store.
func (s *Store) UsageReport(ctx context.Context, q authz.UsageQuery) ([]authz.UsageRow, error) {
	query, args := usageReportQuery(q)
	return list(ctx, s, func(row pgx.Row) (authz.UsageRow, error) {
		var r authz.UsageRow
		var day time.Time
		err := row.Scan(&day, &r.AccountID, &r.KeyID, &r.Model, &r.Requests, &r.PromptTokens, &r.CompletionTokens,
			&r.TotalTokens, &r.CachedTokens, &r.ReasoningTokens)
		if q.By&authz.ByDay != 0 {
			r.Day = day.UTC()
		}
		return r, err
	}, query, args...)
}

// usageReportQuery selects constants for the columns not grouped by, so
// that every row scans the same way.
func usageReportQuery(q authz.UsageQuery) (string, []any) {
	var sel, group []string
	for _, c := range []struct {
		by        authz.UsageGrouping
		expr, not string
	}{
		{authz.ByDay, `date_trunc('day', at, 'UTC')`, `timestamptz 'epoch'`},
		{authz.ByAccount, `account_id`, `''`},
		{authz.ByKey, `key_id`, `''`},
		{authz.ByModel, `model`, `''`},
	} {
		if q.By&c.by == 0 {
			sel = append(sel, c.not)
			continue
		}
		sel = append(sel, c.expr)
		group = append(group, c.expr)
	}
	where, args := []string{`at >= $1`}, []any{ms(q.From)}
	for _, f := range []struct {
		col string
		set bool
		arg any
	}{
		{`at <`, !q.To.IsZero(), ms(q.To)},
		{`account_id =`, q.AccountID != "", q.AccountID},
		{`key_id =`, q.KeyID != "", q.KeyID},
		{`model =`, q.Model != "", q.Model},
	} {
		if f.set {
			args = append(args, f.arg)
			where = append(where, f.col+` $`+strconv.Itoa(len(args)))
		}
	}
	query := `SELECT ` + strings.Join(sel, ", ") + `, ` + usageSums + ` FROM usage WHERE ` + strings.Join(where, " AND ")
	if len(group) == 0 {
		return query + ` HAVING COUNT(*) > 0`, args // no empty row for no records
	}
	cols := strings.Join(group, ", ")
	return query + ` GROUP BY ` + cols + ` ORDER BY ` + cols, args
}
