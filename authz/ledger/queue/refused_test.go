package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/authz/internal/pgtest"
	"modelgate/authz/ledger"
	"modelgate/authz/ledger/queue"
	"modelgate/authz/postgres"
)

// refusingStore refuses, all or none as a store does, every batch that
// holds a record whose request id starts with "poison".
type refusingStore struct{ batchStore }

func (s *refusingStore) AppendUsageBatch(ctx context.Context, recs []ledger.UsageRecord) error {
	for _, r := range recs {
		if strings.HasPrefix(r.RequestID, "poison") {
			return fmt.Errorf("%w: value out of range", ledger.ErrRefused)
		}
	}
	return s.batchStore.AppendUsageBatch(ctx, recs)
}

// A record the store refuses for what it holds is set aside, logged and
// counted; the records around it, in its batch and after it, are written
// and none of them twice.
func TestLedgerSetsAsideRefusedRecords(t *testing.T) {
	store := &refusingStore{}
	l, reg := newLedger(t, store, queue.Config{MaxBatch: 64, FlushInterval: time.Millisecond})
	runWriter(t, l)
	var want []string
	for i := range 1000 {
		r := usageRec(i)
		if i%97 == 3 {
			r.RequestID = "poison-" + r.RequestID
		} else {
			want = append(want, r.RequestID)
		}
		if err := l.AppendUsage(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := store.requestIDs()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("stored %d records, want the %d that are not refused, once each", len(got), len(want))
	}
	if d := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total", "reason=refused"); d != 11 {
		t.Errorf("dropped (refused) = %v, want 11", d)
	}
	if d := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total"); d != 11 {
		t.Errorf("dropped = %v, want only the 11 refused", d)
	}
}

// A refusal is no outage: when the store fails while the writer looks for
// the refused record, what is not yet written is retried, and nothing is
// lost or written twice.
func TestLedgerRefusalDuringAnOutage(t *testing.T) {
	store := &refusingStore{}
	store.write = func(call int) error {
		if call >= 2 && call <= 4 { // the halves of the first refused batch
			return errors.New("connection refused")
		}
		return nil
	}
	l, reg := newLedger(t, store, queue.Config{MaxBatch: 8, FlushInterval: time.Hour,
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	var want []string
	for i := range 8 {
		r := usageRec(i)
		if i == 5 {
			r.RequestID = "poison"
		} else {
			want = append(want, r.RequestID)
		}
		if err := l.AppendUsage(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	runWriter(t, l)
	waitUntil(t, "the batch to be written", func() bool { return len(store.requestIDs()) == len(want) })
	if got := store.requestIDs(); !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}
	if d := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total", "reason=refused"); d != 1 {
		t.Errorf("dropped (refused) = %v, want 1", d)
	}
}

// On PostgreSQL: a request whose agent session id is not UTF-8 is
// recorded, and so are the records of every account behind it; a record
// PostgreSQL still refuses (a time past its range) is set aside without
// holding the queue.
func TestLedgerOnPostgreSQL(t *testing.T) {
	ctx := context.Background()
	store, err := postgres.Open(ctx, pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l, reg := newLedger(t, store, queue.Config{MaxBatch: 16, FlushInterval: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	runWriter(t, l)
	for i := range 40 {
		r := usageRec(i)
		r.AccountID = fmt.Sprintf("acct_%d", i%5)
		switch i {
		case 7:
			r.SessionID = "sess-\xff\xfe\xc3(" // Latin-1 bytes and a broken sequence
			r.ClientRequestID = "req\x00id"
		case 21:
			r.At = time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		if err := l.AppendUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := l.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got, err := store.ListRequests(ctx, ledger.RequestQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 39 {
		t.Errorf("%d records stored, want 39 (all but the one past PostgreSQL's time range)", len(got))
	}
	for _, r := range got {
		if r.RequestID == usageRec(7).RequestID && (r.SessionID != "sess-\uFFFD(" || r.ClientRequestID != "req\uFFFDid") {
			t.Errorf("record 7 stored with session %q and client request id %q, want the invalid bytes replaced", r.SessionID, r.ClientRequestID)
		}
	}
	if d := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total", "reason=refused"); d != 1 {
		t.Errorf("dropped (refused) = %v, want 1", d)
	}
}
