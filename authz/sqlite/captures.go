package sqlite

import (
	"context"
	"strings"
	"time"

	"modelgate/authz/internal/storesql"
	"modelgate/authz/ledger"
)

// captureRows is the most captures one INSERT carries: 11 parameters a
// row, well under SQLite's 32766 parameters.
const captureRows = 128

// insertCaptures is the INSERT of n captures, which skips requests with
// a capture stored already. (SQLite reads the SELECT whole before it
// inserts, so the rows of one statement do not see each other.)
func insertCaptures(n int) string {
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return `WITH b (request_id, at, account_id, key_id, endpoint, model, status, request, response, request_truncated,
		response_truncated) AS (VALUES ` + strings.Repeat(row+", ", n-1) + row + `)
	INSERT INTO captures (request_id, at, account_id, key_id, endpoint, model, status, request, response,
		request_truncated, response_truncated)
	SELECT * FROM b WHERE NOT EXISTS (SELECT 1 FROM captures c WHERE c.request_id = b.request_id)`
}

// SaveCaptures implements ledger.CaptureStore: one transaction of INSERTs of
// up to captureRows captures, so SQLite syncs once a batch.
func (s *Store) SaveCaptures(ctx context.Context, cs []ledger.Capture) error {
	cs = storesql.OneCaptureARequest(cs)
	if len(cs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	args := make([]any, 0, 11*min(len(cs), captureRows))
	for len(cs) > 0 {
		n := min(len(cs), captureRows)
		args = args[:0]
		for _, c := range cs[:n] {
			args = append(args, c.RequestID, c.At.UnixMilli(), c.AccountID, c.KeyID, c.Endpoint, c.Model, int64(c.Status),
				c.Request, c.Response, c.RequestTruncated, c.ResponseTruncated)
		}
		if _, err := tx.ExecContext(ctx, insertCaptures(n), args...); err != nil {
			return refused(err)
		}
		cs = cs[n:]
	}
	return refused(tx.Commit())
}

// CaptureOf implements ledger.CaptureStore.
func (s *Store) CaptureOf(ctx context.Context, requestID string) (ledger.Capture, error) {
	var c ledger.Capture
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT request_id, at, account_id, key_id, endpoint, model, status, request, response,
		request_truncated, response_truncated FROM captures WHERE request_id = ? ORDER BY at DESC LIMIT 1`, requestID).Scan(
		&c.RequestID, &at, &c.AccountID, &c.KeyID, &c.Endpoint, &c.Model, &c.Status, &c.Request, &c.Response,
		&c.RequestTruncated, &c.ResponseTruncated)
	c.At = fromMS(at)
	return c, notFound(err)
}

// DeleteCapturesBefore implements ledger.CaptureStore.
func (s *Store) DeleteCapturesBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	return s.deleteBefore(ctx, "captures", before, limit)
}
