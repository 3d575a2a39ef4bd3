package queue_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/authz/ledger"
	"modelgate/authz/ledger/queue"
	"modelgate/authz/pricing"
	"modelgate/authz/sqlite"
)

// batchStore is a BatchWriter stub: write, when set, runs before a
// batch is kept and can fail it.
type batchStore struct {
	write func(n int) error

	mu      sync.Mutex
	batches [][]ledger.UsageRecord
	calls   int
}

func (s *batchStore) AppendUsageBatch(ctx context.Context, recs []ledger.UsageRecord) error {
	s.mu.Lock()
	s.calls++
	call := s.calls
	s.mu.Unlock()
	if s.write != nil {
		if err := s.write(call); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, append([]ledger.UsageRecord(nil), recs...))
	return nil
}

func (s *batchStore) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, b := range s.batches {
		out = append(out, len(b))
	}
	return out
}

func (s *batchStore) requestIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.batches {
		for _, r := range b {
			out = append(out, r.RequestID)
		}
	}
	return out
}

func usageRec(i int) ledger.UsageRecord {
	return ledger.UsageRecord{RequestID: fmt.Sprintf("req-%05d", i), KeyID: "key_1", AccountID: "acct_1",
		Endpoint: "chat.completions", Model: "gpt-4o", Backend: "b", Status: 200, PromptTokens: int64(i),
		CompletionTokens: 1, TotalTokens: int64(i) + 1, At: time.UnixMilli(1_900_000_000_000 + int64(i)),
		Cost: pricing.Nanos(i * 7), CostKnown: i%10 != 0}
}

func requestIDs(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, usageRec(i).RequestID)
	}
	return out
}

// newLedger returns a ledger over store with its metrics on a registry of
// its own.
func newLedger(t testing.TB, store queue.BatchWriter, cfg queue.Config) (*queue.Ledger, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := queue.New(store, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, reg
}

// writerUnderTest is a Ledger or Captures.
type writerUnderTest interface {
	Run(context.Context) error
	Close(context.Context) error
}

// runWriter starts the writer and stops it at cleanup.
func runWriter(t testing.TB, w writerUnderTest) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		w.Close(context.Background()) //nolint:errcheck // tests check Close themselves
		// ErrClosed: the test closed the writer before Run started.
		if err := <-done; err != nil && !errors.Is(err, queue.ErrClosed) {
			t.Errorf("Run: %v", err)
		}
	})
}

// metric returns a counter or gauge of reg, the sum over its label values
// matching labels ("reason=full").
func ledgerMetric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, want := range labels {
				k, v, _ := strings.Cut(want, "=")
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() != v {
						continue next
					}
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func appendRange(t testing.TB, l *queue.Ledger, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := l.AppendUsage(context.Background(), usageRec(i)); err != nil {
			t.Fatalf("AppendUsage(%d): %v", i, err)
		}
	}
}

// waitUntil waits for cond; its bound only keeps a broken ledger from
// hanging the test (under the race detector on a loaded 2-core machine a
// batch can take seconds).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Full batches are written at once; a partial one waits for FlushInterval
// or, here, Close.
func TestLedgerBatchesAndFlushesOnClose(t *testing.T) {
	store := &batchStore{}
	l, reg := newLedger(t, store, queue.Config{MaxBatch: 10, FlushInterval: time.Hour})
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	appendRange(t, l, 0, 25)
	waitUntil(t, "two full batches", func() bool { return len(store.sizes()) >= 2 })
	if err := l.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if diff := cmp.Diff([]int{10, 10, 5}, store.sizes()); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(requestIDs(0, 25), store.requestIDs()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	for name, want := range map[string]float64{"modelgate_ledger_records_queued_total": 25,
		"modelgate_ledger_records_written_total": 25, "modelgate_ledger_records_dropped_total": 0,
		"modelgate_ledger_queue_records": 0, "modelgate_ledger_batch_write_duration_seconds": 3} {
		if got := ledgerMetric(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

func TestLedgerWritesAfterFlushInterval(t *testing.T) {
	store := &batchStore{}
	l, _ := newLedger(t, store, queue.Config{MaxBatch: 100, FlushInterval: 20 * time.Millisecond})
	runWriter(t, l)
	start := time.Now()
	appendRange(t, l, 0, 3)
	waitUntil(t, "the batch", func() bool { return len(store.sizes()) == 1 })
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("batch written after %v, before FlushInterval", d)
	}
	if diff := cmp.Diff([]int{3}, store.sizes()); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
}

func TestLedgerCloseWithoutRunWritesTheQueue(t *testing.T) {
	store := &batchStore{}
	l, _ := newLedger(t, store, queue.Config{MaxBatch: 4})
	appendRange(t, l, 0, 10)
	if err := l.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if diff := cmp.Diff(requestIDs(0, 10), store.requestIDs()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if err := l.Run(context.Background()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
}

// After Close, records are written straight to the store, for requests
// that outlive the shutdown's grace period.
func TestLedgerAppendAfterCloseWritesDirectly(t *testing.T) {
	fail := atomic.Bool{}
	store := &batchStore{write: func(int) error {
		if fail.Load() {
			return errors.New("database is closed")
		}
		return nil
	}}
	l, reg := newLedger(t, store, queue.Config{})
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, 0, 2)
	fail.Store(true)
	if err := l.AppendUsage(context.Background(), usageRec(2)); err == nil {
		t.Error("AppendUsage to a failing store after Close succeeded")
	}
	if diff := cmp.Diff(requestIDs(0, 2), store.requestIDs()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if got := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total", "reason=closed"); got != 1 {
		t.Errorf("dropped{reason=closed} = %v, want 1", got)
	}
}

// Run stops when its context ends; records then go straight to the store.
func TestLedgerRunStopsWithItsContext(t *testing.T) {
	store := &batchStore{}
	l, _ := newLedger(t, store, queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	appendRange(t, l, 0, 1)
	if diff := cmp.Diff(requestIDs(0, 1), store.requestIDs()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A store that fails for a while loses nothing and duplicates nothing:
// each batch is retried whole until it is written.
func TestLedgerRetriesUntilTheStoreRecovers(t *testing.T) {
	const failures, n = 6, 2000
	store := &batchStore{write: func(call int) error {
		if call <= failures {
			return errors.New("connection refused")
		}
		return nil
	}}
	l, reg := newLedger(t, store, queue.Config{MaxBatch: 64, FlushInterval: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
	runWriter(t, l)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() { appendRange(t, l, w*n/4, (w+1)*n/4) })
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := store.requestIDs()
	if len(got) != n || len(distinct(got)) != n {
		t.Errorf("%d records stored, %d distinct; want %d once each", len(got), len(distinct(got)), n)
	}
	if e := ledgerMetric(t, reg, "modelgate_ledger_write_errors_total"); e != failures {
		t.Errorf("write errors = %v, want %d", e, failures)
	}
	if d := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total"); d != 0 {
		t.Errorf("dropped = %v, want 0", d)
	}
}

func distinct(s []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}

// With no room in the queue, records are dropped and counted: at once,
// or after FullWait.
func TestLedgerFullQueueCountsDrops(t *testing.T) {
	for name, wait := range map[string]time.Duration{"drop at once": -1, "after FullWait": 30 * time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := &batchStore{}
			l, reg := newLedger(t, store, queue.Config{QueueSize: 4, FullWait: wait}) // no writer yet
			appendRange(t, l, 0, 4)
			start := time.Now()
			for i := 4; i < 6; i++ {
				if err := l.AppendUsage(context.Background(), usageRec(i)); !errors.Is(err, queue.ErrFull) {
					t.Errorf("AppendUsage to a full queue = %v, want ErrFull", err)
				}
			}
			if d := time.Since(start); d < 2*wait {
				t.Errorf("two drops took %v, want at least 2×FullWait", d)
			}
			if got := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total", "reason=full"); got != 2 {
				t.Errorf("dropped{reason=full} = %v, want 2", got)
			}
			if got := ledgerMetric(t, reg, "modelgate_ledger_queue_records"); got != 4 {
				t.Errorf("queue = %v, want 4", got)
			}
			if err := l.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(requestIDs(0, 4), store.requestIDs()); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// A record that finds the queue full gets in when the writer makes room
// within FullWait.
func TestLedgerFullQueueWaitsForRoom(t *testing.T) {
	gate := make(chan struct{})
	store := &batchStore{write: func(int) error { <-gate; return nil }}
	l, reg := newLedger(t, store, queue.Config{QueueSize: 1, MaxBatch: 1, FullWait: 10 * time.Second})
	runWriter(t, l)
	appendRange(t, l, 0, 1)
	waitUntil(t, "the writer to take the first record", func() bool { return ledgerMetric(t, reg, "modelgate_ledger_queue_records") == 0 })
	appendRange(t, l, 1, 2) // fills the queue
	errc := make(chan error, 1)
	go func() { errc <- l.AppendUsage(context.Background(), usageRec(2)) }()
	time.Sleep(20 * time.Millisecond)
	close(gate)
	if err := <-errc; err != nil {
		t.Errorf("AppendUsage waiting for room: %v", err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(requestIDs(0, 3), store.requestIDs()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// When Close's deadline passes with the store still down, the records not
// written are counted and reported.
func TestLedgerCloseDeadlineCountsWhatIsLost(t *testing.T) {
	store := &batchStore{write: func(int) error { return errors.New("connection refused") }}
	l, reg := newLedger(t, store, queue.Config{MaxBatch: 4, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	appendRange(t, l, 0, 10)
	waitUntil(t, "a failed write", func() bool { return ledgerMetric(t, reg, "modelgate_ledger_write_errors_total") > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := l.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "10 records not written") {
		t.Errorf("Close = %v, want 10 records not written", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if got := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total", "reason=aborted"); got != 10 {
		t.Errorf("dropped{reason=aborted} = %v, want 10", got)
	}
}

// Every AppendUsage that returns nil ends up in the store exactly once,
// also for appends racing with Close.
func TestLedgerConcurrentAppendsAndClose(t *testing.T) {
	store := &batchStore{write: func(call int) error {
		if call%7 == 0 {
			return errors.New("serialization failure")
		}
		return nil
	}}
	l, reg := newLedger(t, store, queue.Config{QueueSize: 64, MaxBatch: 16, FlushInterval: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, FullWait: 10 * time.Second})
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	const workers, each = 8, 500
	var accepted sync.Map
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w * each; i < (w+1)*each; i++ {
				if l.AppendUsage(context.Background(), usageRec(i)) == nil {
					accepted.Store(usageRec(i).RequestID, true)
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	got := store.requestIDs()
	stored := distinct(got)
	if len(stored) != len(got) {
		t.Errorf("%d records stored, %d distinct", len(got), len(stored))
	}
	n := 0
	accepted.Range(func(k, _ any) bool {
		n++
		if !stored[k.(string)] {
			t.Errorf("accepted record %s is not stored", k)
		}
		return true
	})
	// Only a direct write after Close that hit a failure may be refused.
	refused := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total", "reason=closed")
	if dropped := ledgerMetric(t, reg, "modelgate_ledger_records_dropped_total"); float64(n)+refused != workers*each || dropped != refused {
		t.Errorf("%d of %d records accepted, %v refused after Close, %v dropped", n, workers*each, refused, dropped)
	}
}

// Strings PostgreSQL would refuse are made storable, the model name the
// client sent too.
func TestLedgerSanitizesStrings(t *testing.T) {
	store := &batchStore{}
	l, _ := newLedger(t, store, queue.Config{})
	r := usageRec(0)
	r.RequestID = "bad\xff\x00id"
	r.RequestedModel, r.ProviderModel = "claude\x00\xfe", "upstream\xff"
	if err := l.AppendUsage(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := store.requestIDs(); len(got) != 1 || got[0] != "bad\uFFFD\uFFFDid" {
		t.Fatalf("stored request ids %q", got)
	}
	got := store.batches[0][0]
	if got.RequestedModel != "claude\uFFFD\uFFFD" || got.ProviderModel != "upstream\uFFFD" {
		t.Errorf("stored model names %q, %q; want %q, %q", got.RequestedModel, got.ProviderModel, "claude\uFFFD\uFFFD", "upstream\uFFFD")
	}
}

// Through the SQLite store, the ledger's totals are the records' sums.
func TestLedgerWithSQLite(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l, _ := newLedger(t, store, queue.Config{})
	runWriter(t, l)
	var want ledger.UsageTotals
	for i := range 1000 {
		r := usageRec(i)
		want.Requests++
		want.PromptTokens += r.PromptTokens
		want.CompletionTokens += r.CompletionTokens
		want.TotalTokens += r.TotalTokens
		if r.CostKnown {
			want.Cost += r.Cost
		} else {
			want.UnknownCost++
		}
		if err := l.AppendUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := store.UsageSince(ctx, "acct_1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UsageSince (-want +got):\n%s", diff)
	}
}

// lostReplyStore commits a batch and then reports a failure, once: the
// database wrote it, but the reply never arrived.
type lostReplyStore struct {
	*sqlite.Store
	lost atomic.Bool
}

func (s *lostReplyStore) AppendUsageBatch(ctx context.Context, recs []ledger.UsageRecord) error {
	if err := s.Store.AppendUsageBatch(ctx, recs); err != nil {
		return err
	}
	if s.lost.CompareAndSwap(false, true) {
		return errors.New("connection reset by peer")
	}
	return nil
}

// A batch retried after its commit's reply was lost counts once: the
// ledger gives each record an id and the store skips ids it has.
func TestLedgerRetryAfterLostReplyCountsOnce(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &lostReplyStore{Store: store}
	l, _ := newLedger(t, s, queue.Config{})
	runWriter(t, l)
	appendRange(t, l, 0, 100)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := store.UsageSince(ctx, "acct_1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.lost.Load() || got.Requests != 100 {
		t.Errorf("lost reply: %v; %d records, want 100", s.lost.Load(), got.Requests)
	}
}

// BenchmarkLedgerAppendUsage measures the request path's cost: one
// enqueue, the writer draining to a store that does nothing.
func BenchmarkLedgerAppendUsage(b *testing.B) {
	l, reg := newLedger(b, &nopBatchStore{}, queue.Config{FullWait: time.Minute})
	runWriter(b, l)
	r := usageRec(1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.AppendUsage(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if d := ledgerMetric(b, reg, "modelgate_ledger_records_dropped_total"); d != 0 {
		b.Errorf("%v records dropped", d)
	}
}

func BenchmarkLedgerAppendUsageParallel(b *testing.B) {
	l, _ := newLedger(b, &nopBatchStore{}, queue.Config{FullWait: time.Minute})
	runWriter(b, l)
	r := usageRec(1)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.AppendUsage(ctx, r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

type nopBatchStore struct{}

func (nopBatchStore) AppendUsageBatch(context.Context, []ledger.UsageRecord) error { return nil }
