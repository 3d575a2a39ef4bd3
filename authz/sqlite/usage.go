package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
)

const insertUsage = `INSERT INTO usage (record_id, request_id, key_id, account_id, endpoint, model, backend, status, prompt_tokens,
	completion_tokens, total_tokens, cached_tokens, reasoning_tokens, estimated, attempt, duration_ms, at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (record_id) DO NOTHING`

func usageArgs(r authz.UsageRecord) []any { return appendUsageArgs(make([]any, 0, usageColumns), r) }

func appendUsageArgs(args []any, r authz.UsageRecord) []any {
	var id any // NULL when unset: such records may repeat
	if r.ID != "" {
		id = r.ID
	}
	return append(args, id, r.RequestID, r.KeyID, r.AccountID, r.Endpoint, r.Model, r.Backend, r.Status, r.PromptTokens,
		r.CompletionTokens, r.TotalTokens, r.CachedTokens, r.ReasoningTokens, r.Estimated, r.Attempt, r.Duration.Milliseconds(), r.At.UnixMilli())
}

// AppendUsage implements authz.Store.
func (s *Store) AppendUsage(ctx context.Context, r authz.UsageRecord) error {
	_, err := s.db.ExecContext(ctx, insertUsage, usageArgs(r)...)
	return err
}

// AppendUsageBatch implements authz.Store: one transaction, so SQLite
// syncs once per batch instead of per record, and one statement for up
// to usageRows records, so each costs SQLite and database/sql one
// statement execution.
func (s *Store) AppendUsageBatch(ctx context.Context, recs []authz.UsageRecord) error {
	if len(recs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	args := make([]any, 0, usageColumns*min(len(recs), usageRows))
	for len(recs) > 0 {
		n := min(len(recs), usageRows)
		args = args[:0]
		for _, r := range recs[:n] {
			args = appendUsageArgs(args, r)
		}
		if err := s.insertRows(ctx, tx, n, args); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return tx.Commit()
}

// usageRows is the most records one INSERT carries: 17 parameters each,
// well under SQLite's 32766.
const usageRows = 64

const usageColumns = 17

// insertRows inserts n records in tx: a full group through the statement
// prepared once, fewer (a batch's last group) through one made for them.
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, n int, args []any) error {
	if n != usageRows {
		_, err := tx.ExecContext(ctx, usageInsert(n), args...)
		return err
	}
	s.insertMu.Lock()
	if s.insertFull == nil {
		st, err := s.db.PrepareContext(ctx, insertUsageFull)
		if err != nil {
			s.insertMu.Unlock()
			return err
		}
		s.insertFull = st
	}
	full := s.insertFull
	s.insertMu.Unlock()
	_, err := tx.StmtContext(ctx, full).ExecContext(ctx, args...)
	return err
}

var insertUsageFull = usageInsert(usageRows)

func usageInsert(n int) string {
	row := "(" + strings.Repeat("?, ", usageColumns-1) + "?)"
	head, _, _ := strings.Cut(insertUsage, "VALUES")
	return head + "VALUES " + strings.Repeat(row+", ", n-1) + row + " ON CONFLICT (record_id) DO NOTHING"
}

// UsageSince implements authz.Store.
func (s *Store) UsageSince(ctx context.Context, accountID string, since time.Time) (authz.UsageTotals, error) {
	var t authz.UsageTotals
	err := s.db.QueryRowContext(ctx, `SELECT `+storesql.UsageSums+` FROM usage WHERE account_id = ? AND at >= ? AND attempt = 0`,
		accountID, since.UnixMilli()).Scan(&t.Requests, &t.PromptTokens, &t.CompletionTokens, &t.TotalTokens,
		&t.CachedTokens, &t.ReasoningTokens)
	return t, err
}

// UsageReport implements authz.Store.
func (s *Store) UsageReport(ctx context.Context, q authz.UsageQuery) ([]authz.UsageRow, error) {
	query, args := dialect.UsageReport(q)
	return list(ctx, s, func(row scanner) (authz.UsageRow, error) {
		var r authz.UsageRow
		var day int64
		err := row.Scan(&day, &r.AccountID, &r.KeyID, &r.Model, &r.Requests, &r.PromptTokens, &r.CompletionTokens,
			&r.TotalTokens, &r.CachedTokens, &r.ReasoningTokens)
		if q.By&authz.ByDay != 0 {
			r.Day = fromMS(day)
		}
		return r, err
	}, query, args...)
}

// dialect is SQLite's for the usage report: times are Unix milliseconds.
var dialect = storesql.Dialect{
	Day:   `(at / 86400000) * 86400000`,
	NoDay: `0`,
	Param: func(int) string { return `?` },
	Time:  func(t time.Time) any { return t.UnixMilli() },
}
