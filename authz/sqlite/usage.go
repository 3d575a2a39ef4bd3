package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"modelgate/authz/internal/storesql"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// usageInsertHead is the usage INSERT up to its rows of parameters.
const usageInsertHead = `INSERT INTO usage (record_id, request_id, key_id, account_id, endpoint, model, backend, status, prompt_tokens,
	completion_tokens, total_tokens, cached_tokens, reasoning_tokens, estimated, attempt, duration_ms, at, cost_nanos,
	audio_ms, images, client_request_id, cache_write_tokens, cache_write_1h_tokens, session_id, web_search_requests, guardrails,
	requested_model, provider_model)
	VALUES `

const usageColumns = 28

// usageGroups are the row counts of the usage INSERTs the Store prepares
// at Open, largest first. A batch goes out in as many of the largest as
// fit, then of the next, so any batch takes prepared statements only
// (preparing one of a thousand parameters cost more than its rows), and
// its last 63 records at most 3+3+3 executions. 64 rows carry 1792
// parameters, well under SQLite's 32766.
var usageGroups = [...]int{64, 16, 4, 1}

// usageInsert is the INSERT of n usage records.
func usageInsert(n int) string {
	row := "(" + strings.Repeat("?, ", usageColumns-1) + "?)"
	return usageInsertHead + strings.Repeat(row+", ", n-1) + row + " ON CONFLICT (record_id) DO NOTHING"
}

// appendUsageArgs appends r's parameters to args. The key, account,
// endpoint, model names and backend are mostly those of the record before
// it in args: their boxes are reused rather than allocated again. Ints are
// passed as int64, which database/sql takes without converting.
func appendUsageArgs(args []any, r ledger.UsageRecord) []any {
	var id any // NULL when unset: such records may repeat
	if r.ID != "" {
		id = r.ID
	}
	var prev []any
	if len(args) >= usageColumns {
		prev = args[len(args)-usageColumns:]
	}
	return append(args, id, r.RequestID, reuse(prev, 2, r.KeyID), reuse(prev, 3, r.AccountID),
		reuse(prev, 4, r.Endpoint), reuse(prev, 5, r.Model), reuse(prev, 6, r.Backend), int64(r.Status),
		r.PromptTokens, r.CompletionTokens, r.TotalTokens, r.CachedTokens, r.ReasoningTokens, r.Estimated,
		int64(r.Attempt), r.Duration.Milliseconds(), r.At.UnixMilli(), cost(r), r.Audio.Milliseconds(), r.Images, r.ClientRequestID,
		r.CacheWriteTokens, r.CacheWrite1hTokens, r.SessionID, r.WebSearchRequests, storesql.GuardArg(r.Guardrails),
		reuse(prev, 26, r.RequestedModel), reuse(prev, 27, r.ProviderModel))
}

// cost is a record's cost parameter: NULL when it is unknown.
func cost(r ledger.UsageRecord) any {
	if !r.CostKnown {
		return nil
	}
	return int64(r.Cost)
}

// reuse returns prev[i] if it holds v, else v boxed anew.
func reuse(prev []any, i int, v string) any {
	if prev != nil {
		if p, ok := prev[i].(string); ok && p == v {
			return prev[i]
		}
	}
	return v
}

// AppendUsage implements ledger.UsageStore.
func (s *Store) AppendUsage(ctx context.Context, r ledger.UsageRecord) error {
	_, err := s.inserts[len(usageGroups)-1].ExecContext(ctx, appendUsageArgs(make([]any, 0, usageColumns), r)...)
	return refused(err)
}

// AppendUsageBatch implements ledger.UsageStore: one transaction, so SQLite
// syncs once per batch instead of per record, and one statement for up
// to usageGroups[0] records, so each costs SQLite and database/sql one
// statement execution.
func (s *Store) AppendUsageBatch(ctx context.Context, recs []ledger.UsageRecord) error {
	if len(recs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	args := make([]any, 0, usageColumns*min(len(recs), usageGroups[0]))
	for i, n := range usageGroups {
		var st *sql.Stmt // s.inserts[i] in tx, once it is needed
		for ; len(recs) >= n; recs = recs[n:] {
			if st == nil {
				st = tx.StmtContext(ctx, s.inserts[i])
			}
			args = args[:0]
			for _, r := range recs[:n] {
				args = appendUsageArgs(args, r)
			}
			if _, err := st.ExecContext(ctx, args...); err != nil {
				return refused(err)
			}
		}
	}
	return refused(tx.Commit())
}

// UsageSince implements ledger.UsageStore.
func (s *Store) UsageSince(ctx context.Context, accountID string, since time.Time) (ledger.UsageTotals, error) {
	var t ledger.UsageTotals
	err := s.db.QueryRowContext(ctx, `SELECT `+storesql.UsageSums+` FROM usage WHERE account_id = ? AND at >= ? AND attempt = 0`,
		accountID, since.UnixMilli()).Scan(storesql.TotalsDest(&t)...)
	return t, err
}

// SpentSince implements ledger.UsageStore.
func (s *Store) SpentSince(ctx context.Context, subject string, since time.Time) (pricing.Nanos, error) {
	query, id, err := dialect.SpentSince(subject)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.db.QueryRowContext(ctx, query, id, dialect.Time(since)).Scan(storesql.SumDest(&n, 1)...)
	return pricing.Nanos(n), err
}

// UsageReport implements ledger.UsageStore.
func (s *Store) UsageReport(ctx context.Context, q ledger.UsageQuery) ([]ledger.UsageRow, error) {
	query, args := dialect.UsageReport(q)
	return list(ctx, s, func(row scanner) (ledger.UsageRow, error) {
		var r ledger.UsageRow
		var day int64
		err := row.Scan(append([]any{&day, &r.AccountID, &r.KeyID, &r.Model}, storesql.TotalsDest(&r.UsageTotals)...)...)
		if q.By&ledger.ByDay != 0 {
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
	Guard: `EXISTS (SELECT 1 FROM json_each(NULLIF(guardrails, '')) WHERE json_extract(value, '$[2]') = ?)`,
}
