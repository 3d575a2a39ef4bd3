package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"modelgate/authz/internal/storesql"
	"modelgate/authz/ledger"
)

// insertCaptures inserts a batch of captures given as one array a column:
// one statement whatever the batch's size, prepared once a connection, and
// atomic. It skips requests with a capture stored already; captures has
// no unique index to conflict on, but request_id is indexed.
const insertCaptures = `INSERT INTO captures (request_id, at, account_id, key_id, endpoint, model, status, request, response,
		request_truncated, response_truncated)
	SELECT b.* FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
		$8::text[], $9::text[], $10::boolean[], $11::boolean[])
		AS b (request_id, at, account_id, key_id, endpoint, model, status, request, response, request_truncated, response_truncated)
	WHERE NOT EXISTS (SELECT FROM captures c WHERE c.request_id = b.request_id)`

// SaveCaptures implements ledger.CaptureStore: one INSERT of the batch.
func (s *Store) SaveCaptures(ctx context.Context, cs []ledger.Capture) error {
	cs = storesql.OneCaptureARequest(cs)
	if len(cs) == 0 {
		return nil
	}
	var cols captureColumns
	for _, c := range cs {
		cols.add(c)
	}
	_, err := s.pool.Exec(ctx, insertCaptures, cols.ids, cols.at, cols.accounts, cols.keys, cols.endpoints, cols.models,
		cols.status, cols.requests, cols.responses, cols.requestCut, cols.responseCut)
	return refused(err)
}

// captureColumns are a batch of captures as insertCaptures' arrays.
type captureColumns struct {
	ids, accounts, keys, endpoints, models, requests, responses []string
	at                                                          []time.Time
	status                                                      []int64
	requestCut, responseCut                                     []bool
}

// add appends a capture. The status goes as a bigint, which PostgreSQL
// refuses to cast to the integer column when it is out of range, rather
// than wrapped around in an int32.
func (cols *captureColumns) add(c ledger.Capture) {
	cols.ids, cols.accounts, cols.keys = append(cols.ids, c.RequestID), append(cols.accounts, c.AccountID), append(cols.keys, c.KeyID)
	cols.endpoints, cols.models = append(cols.endpoints, c.Endpoint), append(cols.models, c.Model)
	cols.requests, cols.responses = append(cols.requests, c.Request), append(cols.responses, c.Response)
	cols.at, cols.status = append(cols.at, ms(c.At)), append(cols.status, int64(c.Status))
	cols.requestCut, cols.responseCut = append(cols.requestCut, c.RequestTruncated), append(cols.responseCut, c.ResponseTruncated)
}

// CaptureOf implements ledger.CaptureStore.
func (s *Store) CaptureOf(ctx context.Context, requestID string) (ledger.Capture, error) {
	var c ledger.Capture
	err := s.row(ctx, func(row pgx.Row) error {
		return row.Scan(&c.RequestID, &c.At, &c.AccountID, &c.KeyID, &c.Endpoint, &c.Model, &c.Status, &c.Request, &c.Response,
			&c.RequestTruncated, &c.ResponseTruncated)
	}, `SELECT request_id, at, account_id, key_id, endpoint, model, status, request, response,
		request_truncated, response_truncated FROM captures WHERE request_id = $1 ORDER BY at DESC LIMIT 1`, requestID)
	c.At = c.At.UTC()
	return c, err
}

// DeleteCapturesBefore implements ledger.CaptureStore.
func (s *Store) DeleteCapturesBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.deleteBefore(ctx, "captures", before, limit)
}
