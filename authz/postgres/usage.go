package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"modelgate/authz/internal/storesql"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

var usageColumns = []string{"record_id", "request_id", "key_id", "account_id", "endpoint", "model", "backend", "status", "prompt_tokens",
	"completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens", "estimated", "attempt", "duration_ms", "at",
	"cost_nanos", "audio_ms", "images", "client_request_id", "cache_write_tokens",
	"cache_write_1h_tokens", "session_id", "web_search_requests", "guardrails", "requested_model", "provider_model"}

func usageValues(r ledger.UsageRecord) []any {
	var id *string // NULL when unset: such records may repeat
	if r.ID != "" {
		id = &r.ID
	}
	var cost *int64 // NULL when unknown
	if r.CostKnown {
		cost = (*int64)(&r.Cost)
	}
	return []any{id, r.RequestID, r.KeyID, r.AccountID, r.Endpoint, r.Model, r.Backend, int32(r.Status), r.PromptTokens,
		r.CompletionTokens, r.TotalTokens, r.CachedTokens, r.ReasoningTokens, r.Estimated, int32(r.Attempt), r.Duration.Milliseconds(), ms(r.At),
		cost, r.Audio.Milliseconds(), r.Images, r.ClientRequestID, r.CacheWriteTokens, r.CacheWrite1hTokens,
		r.SessionID, r.WebSearchRequests, storesql.GuardArg(r.Guardrails), r.RequestedModel, r.ProviderModel}
}

// AppendUsage implements ledger.UsageStore.
func (s *Store) AppendUsage(ctx context.Context, r ledger.UsageRecord) error {
	_, err := s.pool.Exec(ctx, insertUsage, usageValues(r)...)
	return refused(err)
}

var insertUsage = func() string {
	params := make([]string, len(usageColumns))
	for i := range params {
		params[i] = "$" + strconv.Itoa(i+1)
	}
	return `INSERT INTO usage (` + strings.Join(usageColumns, ", ") + `) VALUES (` + strings.Join(params, ", ") +
		`) ON CONFLICT (record_id) DO NOTHING`
}()

// AppendUsageBatch implements ledger.UsageStore: one COPY into a temporary
// table, then one INSERT that skips ids already stored, in a transaction.
// (COPY itself cannot skip conflicts.) A record PostgreSQL refuses for
// its content fails the batch with ledger.ErrRefused.
func (s *Store) AppendUsageBatch(ctx context.Context, recs []ledger.UsageRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return refused(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
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
	}))
}

// UsageSince implements ledger.UsageStore.
func (s *Store) UsageSince(ctx context.Context, accountID string, since time.Time) (ledger.UsageTotals, error) {
	var t ledger.UsageTotals
	err := s.row(ctx, func(row pgx.Row) error {
		return row.Scan(storesql.TotalsDest(&t)...)
	}, `SELECT `+storesql.UsageSums+` FROM usage WHERE account_id = $1 AND at >= $2 AND attempt = 0`, accountID, ms(since))
	return t, err
}

// SpentSince implements ledger.UsageStore.
func (s *Store) SpentSince(ctx context.Context, subject string, since time.Time) (pricing.Nanos, error) {
	query, id, err := dialect.SpentSince(subject)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.row(ctx, func(row pgx.Row) error { return row.Scan(storesql.SumDest(&n, 1)...) }, query, id, dialect.Time(since))
	return pricing.Nanos(n), err
}

// UsageReport implements ledger.UsageStore.
func (s *Store) UsageReport(ctx context.Context, q ledger.UsageQuery) ([]ledger.UsageRow, error) {
	query, args := dialect.UsageReport(q)
	return list(ctx, s, func(row pgx.Row) (ledger.UsageRow, error) {
		var r ledger.UsageRow
		var day time.Time
		err := row.Scan(append([]any{&day, &r.AccountID, &r.KeyID, &r.Model}, storesql.TotalsDest(&r.UsageTotals)...)...)
		if q.By&ledger.ByDay != 0 {
			r.Day = day.UTC()
		}
		return r, err
	}, query, args...)
}

// dialect is PostgreSQL's for the usage report.
var dialect = storesql.Dialect{
	Day:   `date_trunc('day', at, 'UTC')`,
	NoDay: `timestamptz 'epoch'`,
	Param: func(n int) string { return `$` + strconv.Itoa(n) },
	Time:  func(t time.Time) any { return ms(t) },
	Guard: `EXISTS (SELECT 1 FROM jsonb_array_elements(NULLIF(guardrails, '')::jsonb) g WHERE g ->> 2 = ?)`,
}
