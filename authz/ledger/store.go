package ledger

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"modelgate/authz/pricing"
)

// The storage interfaces of the ledger. Like the others of authz.Store,
// their methods are safe for concurrent use, lookups that find nothing
// return authz.ErrNotFound, and times are kept to the millisecond.

// UsageStore is the usage ledger as a store keeps it: one record per
// request (and per failed attempt), summed for reports and budgets, listed
// for the requests page, and expired by retention. Ledger writes it in
// batches.
type UsageStore interface {
	// AppendUsage appends a record to the usage ledger.
	AppendUsage(ctx context.Context, rec UsageRecord) error
	// AppendUsageBatch appends records in one transaction: all or none.
	// Records whose ID is stored already are skipped, as by AppendUsage.
	// ErrRefused when the store refused a record for its content.
	AppendUsageBatch(ctx context.Context, recs []UsageRecord) error
	// UsageSince sums an account's usage records at or after since.
	UsageSince(ctx context.Context, accountID string, since time.Time) (UsageTotals, error)
	// UsageReport sums the selected usage records per group, ordered by
	// day, account, key and model; groups without records are absent.
	UsageReport(ctx context.Context, q UsageQuery) ([]UsageRow, error)
	// SpentSince sums the known cost of the requests (not failed
	// attempts) at or after since of a subject as budgets name it:
	// "key:<id>", "account:<id>" or "group:<id>" (the records of the
	// group's accounts as they are now). Budget counters lost with a
	// process or a Redis are rebuilt from it. A malformed subject is an
	// error.
	SpentSince(ctx context.Context, subject string, since time.Time) (pricing.Nanos, error)
	// DeleteUsageBefore deletes at most limit usage records from before
	// before, oldest first, and returns how many it deleted: retention,
	// in batches that never hold the database long.
	DeleteUsageBefore(ctx context.Context, before time.Time, limit int) (int64, error)
	// ListRequests returns usage records (requests, not failed attempts),
	// newest first, as the query selects.
	ListRequests(ctx context.Context, q RequestQuery) ([]UsageRecord, error)
}

// CaptureStore keeps the bodies payload capture took of exchanges, by
// request. Captures writes it in batches.
type CaptureStore interface {
	// SaveCaptures keeps exchanges' captured bodies, all or none: a
	// batch that fails stores nothing, so that it can be retried whole.
	// A store keeps one capture a request: a capture whose request has
	// one stored, or earlier in the batch, is skipped, so that a batch
	// written again after its reply was lost stores nothing twice.
	// ErrRefused when the store refused a capture for its content.
	SaveCaptures(ctx context.Context, cs []Capture) error
	// CaptureOf returns the capture of a request; authz.ErrNotFound when
	// there is none.
	CaptureOf(ctx context.Context, requestID string) (Capture, error)
	// DeleteCapturesBefore deletes at most limit captures from before
	// before, oldest first, and returns how many it deleted.
	DeleteCapturesBefore(ctx context.Context, before time.Time, limit int) (int64, error)
}

// ErrRefused is what a batch write's error is when the store refused
// a record for its content (bytes its text cannot hold, a value out of
// range, a constraint the record breaks), not for being unavailable:
// the same records would fail the same way again, so retrying them
// is futile, whereas the rest of their batch may be stored without them.
// It knows nothing of HTTP.
var ErrRefused = errors.New("refused by the store")

// Storable is s as every store can keep it as text: valid UTF-8 without
// NUL, invalid bytes and NUL replaced by U+FFFD. PostgreSQL refuses both,
// and a string a client chose (a request id, a session id, a body) may
// carry any bytes.
func Storable(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
