package queue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/ledger/queue"
	"modelgate/authz/sqlite"
)

// captureSink is a CaptureWriter stub: fail, when set, runs before a
// batch is kept and can fail it, all of it.
type captureSink struct {
	fail func(call int, batch []ledger.Capture) error

	mu       sync.Mutex
	calls    int
	failures int
	saved    []ledger.Capture
}

func (s *captureSink) SaveCaptures(ctx context.Context, cs []ledger.Capture) error {
	s.mu.Lock()
	s.calls++
	call := s.calls
	s.mu.Unlock()
	err := ctx.Err()
	if s.fail != nil && err == nil {
		err = s.fail(call, cs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failures++
		return err
	}
	s.saved = append(s.saved, cs...)
	return nil
}

func (s *captureSink) requestIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.saved {
		out = append(out, c.RequestID)
	}
	return out
}

func (s *captureSink) failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures
}

func capture(i int) ledger.Capture {
	return ledger.Capture{RequestID: fmt.Sprintf("req-%05d", i), AccountID: "acct_1", KeyID: "key_1",
		Endpoint: "chat.completions", Model: "gpt-4o", Status: 200, At: time.UnixMilli(1_900_000_000_000 + int64(i)).UTC(),
		Request:  fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":"question %d"}]}`, i),
		Response: fmt.Sprintf(`{"choices":[{"message":{"content":"answer %d"}}]}`, i), ResponseTruncated: i%3 == 0}
}

func captureIDs(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, capture(i).RequestID)
	}
	return out
}

// newCaptures returns a capture writer over sink with its metrics on a
// registry of its own.
func newCaptures(t testing.TB, sink queue.CaptureWriter, cfg queue.Config) (*queue.Captures, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := queue.NewCaptures(sink, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

func saveRange(t testing.TB, c *queue.Captures, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := c.SaveCapture(context.Background(), capture(i)); err != nil {
			t.Fatalf("SaveCapture(%d): %v", i, err)
		}
	}
}

// A store that fails for a while loses no capture and stores none twice:
// a batch is written in one call, all or none, and a failed one is
// retried whole.
func TestCapturesRetryFailedBatchesWhole(t *testing.T) {
	const outage, n = 6, 300
	// The first writes fail, then every fifth for a while.
	sink := &captureSink{fail: func(call int, _ []ledger.Capture) error {
		if call <= outage || (call <= n && call%5 == 0) {
			return errors.New("connection refused")
		}
		return nil
	}}
	c, reg := newCaptures(t, sink, queue.Config{MaxBatch: 16, FlushInterval: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
	runWriter(t, c)
	saveRange(t, c, 0, n)
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if diff := cmp.Diff(captureIDs(0, n), sink.requestIDs()); diff != "" {
		t.Errorf("captures stored (-want +got):\n%s", diff)
	}
	failures := sink.failed()
	if failures <= outage {
		t.Fatalf("%d failed writes, want more than %d", failures, outage)
	}
	for name, want := range map[string]float64{"modelgate_capture_records_queued_total": n,
		"modelgate_capture_records_written_total": n, "modelgate_capture_write_errors_total": float64(failures),
		"modelgate_capture_records_dropped_total": 0, "modelgate_capture_queue_records": 0} {
		if got := ledgerMetric(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// Captures go to the store a batch a call, as many as are queued up to
// MaxBatch: not one by one.
func TestCapturesWriteBatchesInOneCall(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	sink := &captureSink{fail: func(_ int, batch []ledger.Capture) error {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(batch))
		return nil
	}}
	c, _ := newCaptures(t, sink, queue.Config{MaxBatch: 16})
	saveRange(t, c, 0, 40) // queued before the writer runs
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if diff := cmp.Diff([]int{16, 16, 8}, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(captureIDs(0, 40), sink.requestIDs()); diff != "" {
		t.Errorf("captures stored (-want +got):\n%s", diff)
	}
}

// closeWithin is a context for Close ending after d: a writer that retried
// a refused batch, which never succeeds, would keep Close waiting.
func closeWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// poisoned reports whether a batch holds a capture whose model is
// "poison", which a store refuses.
func poisoned(batch []ledger.Capture) bool {
	return slices.ContainsFunc(batch, func(c ledger.Capture) bool { return c.Model == "poison" })
}

// A capture the store refuses for its content holds back no capture
// behind it, also while the store fails now and then for other reasons:
// the others are all stored, once each and in order, the refused ones
// left out and counted, and nothing waits for a retry that cannot succeed.
func TestCapturesRefusedCaptureHoldsNothingBack(t *testing.T) {
	const n = 300
	isPoison := func(i int) bool { return i%37 == 5 || i == n-1 || (i >= 100 && i < 103) }
	sink := &captureSink{fail: func(call int, batch []ledger.Capture) error {
		switch {
		case call%7 == 0:
			return errors.New("connection reset by peer")
		case poisoned(batch):
			return fmt.Errorf("ERROR: new row violates check constraint (SQLSTATE 23514): %w", ledger.ErrRefused)
		}
		return nil
	}}
	c, reg := newCaptures(t, sink, queue.Config{MaxBatch: 16, FlushInterval: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	runWriter(t, c)
	var want []string
	refused := 0
	for i := range n {
		rec := capture(i)
		if isPoison(i) {
			rec.Model = "poison"
			refused++
		} else {
			want = append(want, rec.RequestID)
		}
		if err := c.SaveCapture(context.Background(), rec); err != nil {
			t.Fatalf("SaveCapture(%d): %v", i, err)
		}
	}
	if err := c.Close(closeWithin(t, time.Minute)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if diff := cmp.Diff(want, sink.requestIDs()); diff != "" {
		t.Errorf("captures stored (-want +got):\n%s", diff)
	}
	for labels, want := range map[string]float64{"reason=refused": float64(refused), "reason=full": 0, "reason=aborted": 0} {
		if got := ledgerMetric(t, reg, "modelgate_capture_records_dropped_total", labels); got != want {
			t.Errorf("dropped{%s} = %v, want %v", labels, got, want)
		}
	}
	// After Close a capture is written directly; a refused one is left out too.
	poison := capture(n)
	poison.Model = "poison"
	if err := c.SaveCapture(context.Background(), poison); err != nil {
		t.Errorf("SaveCapture of a refused capture after Close: %v", err)
	}
	if got := ledgerMetric(t, reg, "modelgate_capture_records_dropped_total", "reason=refused"); got != float64(refused+1) {
		t.Errorf("dropped{reason=refused} = %v, want %v", got, refused+1)
	}
}

// When Close's deadline passes with the store still down, the captures not
// written are counted and reported; those written before stay written.
func TestCapturesCloseDeadlineCountsWhatIsLost(t *testing.T) {
	var down atomic.Bool
	failed := make(chan struct{})
	var once sync.Once
	sink := &captureSink{fail: func(int, []ledger.Capture) error {
		if !down.Load() {
			return nil
		}
		once.Do(func() { close(failed) })
		return errors.New("connection refused")
	}}
	c, reg := newCaptures(t, sink, queue.Config{MaxBatch: 4, FlushInterval: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	saveRange(t, c, 0, 3)
	waitUntil(t, "the first captures are stored", func() bool { return len(sink.requestIDs()) == 3 })
	down.Store(true)
	saveRange(t, c, 3, 10)
	<-failed
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	err := c.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "7 captures not written") {
		t.Errorf("Close = %v, want 7 captures not written", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if diff := cmp.Diff(captureIDs(0, 3), sink.requestIDs()); diff != "" {
		t.Errorf("captures stored (-want +got):\n%s", diff)
	}
	// After Close a capture is written directly, and counted when that fails.
	if err := c.SaveCapture(context.Background(), capture(10)); err == nil {
		t.Error("SaveCapture to a failing store after Close succeeded")
	}
	for labels, want := range map[string]float64{"reason=aborted": 7, "reason=closed": 1, "reason=full": 0, "reason=refused": 0} {
		if got := ledgerMetric(t, reg, "modelgate_capture_records_dropped_total", labels); got != want {
			t.Errorf("dropped{%s} = %v, want %v", labels, got, want)
		}
	}
	if got := ledgerMetric(t, reg, "modelgate_capture_records_written_total"); got != 3 {
		t.Errorf("written = %v, want 3", got)
	}
}

// With no room in the queue, captures are dropped and counted; the queue
// holds 1024 by default, far fewer than the ledger's as captures are
// large.
func TestCapturesFullQueueCountsDrops(t *testing.T) {
	for name, size := range map[string]int{"QueueSize": 2, "default": 0} {
		t.Run(name, func(t *testing.T) {
			sink := &captureSink{}
			c, reg := newCaptures(t, sink, queue.Config{QueueSize: size, FullWait: -1}) // no writer yet
			want := size
			if size == 0 {
				want = 1024
			}
			saveRange(t, c, 0, want)
			err := c.SaveCapture(context.Background(), capture(want))
			if !errors.Is(err, queue.ErrFull) || err.Error() != "capture queue full" {
				t.Errorf("SaveCapture to a full queue = %v, want ErrFull", err)
			}
			if got := ledgerMetric(t, reg, "modelgate_capture_records_dropped_total", "reason=full"); got != 1 {
				t.Errorf("dropped{reason=full} = %v, want 1", got)
			}
			if got := ledgerMetric(t, reg, "modelgate_capture_queue_records"); got != float64(want) {
				t.Errorf("queue = %v, want %d", got, want)
			}
			if err := c.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(captureIDs(0, want), sink.requestIDs()); diff != "" {
				t.Errorf("captures stored (-want +got):\n%s", diff)
			}
			if err := c.Run(context.Background()); !errors.Is(err, queue.ErrClosed) {
				t.Errorf("Run after Close = %v, want ErrClosed", err)
			}
		})
	}
}

// Strings PostgreSQL would refuse are made storable, the bodies too.
func TestCapturesSanitizeStrings(t *testing.T) {
	sink := &captureSink{}
	c, _ := newCaptures(t, sink, queue.Config{})
	const bad, clean = "bad\xff\x00s", "bad\uFFFD\uFFFDs"
	rec := ledger.Capture{RequestID: bad, AccountID: bad, KeyID: bad, Endpoint: bad, Model: bad, Status: 200,
		Request: bad, Response: bad}
	if err := c.SaveCapture(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []ledger.Capture{{RequestID: clean, AccountID: clean, KeyID: clean, Endpoint: clean, Model: clean, Status: 200,
		Request: clean, Response: clean}}
	if diff := cmp.Diff(want, sink.saved); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// flakyCaptureStore is the SQLite store with an outage: SaveCaptures
// fails while down. It counts the captures the store took by request id.
type flakyCaptureStore struct {
	*sqlite.Store
	down   atomic.Bool
	failed chan struct{} // closed at the first failure
	once   sync.Once

	mu    sync.Mutex
	saved map[string]int
}

func (s *flakyCaptureStore) SaveCaptures(ctx context.Context, cs []ledger.Capture) error {
	if s.down.Load() {
		s.once.Do(func() { close(s.failed) })
		return errors.New("dial tcp: connection refused")
	}
	if err := s.Store.SaveCaptures(ctx, cs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.saved[c.RequestID]++
	}
	return nil
}

// Through the SQLite store: captures saved while the store is down are all
// there, once each, after it recovers.
func TestCapturesWithSQLiteOutage(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &flakyCaptureStore{Store: store, failed: make(chan struct{}), saved: map[string]int{}}
	s.down.Store(true)
	c, _ := newCaptures(t, s, queue.Config{MaxBatch: 16, FlushInterval: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	runWriter(t, c)
	const n = 100
	saveRange(t, c, 0, n)
	<-s.failed
	if _, err := store.CaptureOf(ctx, capture(0).RequestID); !errors.Is(err, authz.ErrNotFound) {
		t.Fatalf("CaptureOf during the outage = %v, want ErrNotFound", err)
	}
	s.down.Store(false)
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i := range n {
		want := capture(i)
		got, err := store.CaptureOf(ctx, want.RequestID)
		if err != nil {
			t.Fatalf("CaptureOf(%s): %v", want.RequestID, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("CaptureOf(%s) (-want +got):\n%s", want.RequestID, diff)
		}
		if k := s.saved[want.RequestID]; k != 1 {
			t.Errorf("%s stored %d times", want.RequestID, k)
		}
	}
}

// Through the SQLite store, whose trigger refuses some captures as a
// constraint would: the others are all stored, and the refused counted.
func TestCapturesRefusedBySQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TRIGGER not_poison BEFORE INSERT ON captures
		WHEN NEW.model = 'poison' BEGIN SELECT RAISE(ABORT, 'poison'); END`); err != nil {
		t.Fatal(err)
	}
	c, reg := newCaptures(t, store, queue.Config{MaxBatch: 64, FlushInterval: time.Millisecond})
	runWriter(t, c)
	const n = 200
	for i := range n {
		rec := capture(i)
		if i%50 == 7 {
			rec.Model = "poison"
		}
		if err := c.SaveCapture(ctx, rec); err != nil {
			t.Fatalf("SaveCapture(%d): %v", i, err)
		}
	}
	if err := c.Close(closeWithin(t, time.Minute)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i := range n {
		_, err := store.CaptureOf(ctx, capture(i).RequestID)
		if want := i%50 != 7; (err == nil) != want {
			t.Errorf("CaptureOf(%s) = %v, want stored %v", capture(i).RequestID, err, want)
		}
	}
	if got := ledgerMetric(t, reg, "modelgate_capture_records_dropped_total", "reason=refused"); got != n/50 {
		t.Errorf("dropped{reason=refused} = %v, want %d", got, n/50)
	}
}
