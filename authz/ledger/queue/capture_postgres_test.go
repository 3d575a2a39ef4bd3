package queue_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"modelgate/authz/internal/pgtest"
	"modelgate/authz/ledger"
	"modelgate/authz/ledger/queue"
	"modelgate/authz/postgres"
)

var (
	captureLoad = flag.String("capture.load", "",
		"capture rates per second for TestCapturesLoadPostgres, comma-separated (e.g. 40,200,1000); empty skips it")
	captureLoadFor = flag.Duration("capture.load.for", 10*time.Second,
		"how long TestCapturesLoadPostgres offers each rate")
	captureLoadRTT = flag.Duration("capture.load.rtt", 0,
		"a round trip TestCapturesLoadPostgres adds between the store and PostgreSQL, as a network would (e.g. 2ms)")
)

// loadBodies are bodies of realistic sizes for captures: JSON chat
// requests and answers of words, from 2 KiB to 64 KiB, log-uniform (most
// bodies are small, some reach observability.capture.max_bytes' default).
// Text, not random bytes: PostgreSQL compresses captures as it would
// real ones.
var loadBodies = sync.OnceValue(func() []string {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields(`the model answers a question about the gateway with tokens streamed from a provider while
		envoy routes each request to its backend and the ledger records usage cost latency status account key prompt
		completion tool call function arguments json schema error retry fallback deployment region cache image audio`)
	bodies := make([]string, 256)
	for i := range bodies {
		size := int(2048 * math.Exp2(5*rng.Float64())) // 2 KiB to 64 KiB
		var b strings.Builder
		b.WriteString(`{"model":"gpt-4o","messages":[{"role":"user","content":"`)
		for b.Len() < size-4 {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		bodies[i] = b.String()[:size-4] + `"}]}`
	}
	return bodies
})

// loadCapture is the i-th capture of a load run: two bodies of the pool.
func loadCapture(run string, i int) ledger.Capture {
	bodies := loadBodies()
	return ledger.Capture{RequestID: fmt.Sprintf("%s-%07d", run, i), AccountID: "acct_load", KeyID: "key_load",
		Endpoint: "chat.completions", Model: "gpt-4o", Status: 200, At: time.UnixMilli(1_900_000_000_000 + int64(i)).UTC(),
		Request: bodies[i%len(bodies)], Response: bodies[(i*7+3)%len(bodies)]}
}

// loadResult is what one run at a rate did.
type loadResult struct {
	rate, offered                           int           // the rate asked for, the captures offered
	took                                    time.Duration // to offer them all
	drained                                 time.Duration // until Close returned
	dropped, written, stored, writeErrors   int
	batches                                 int
	bytes                                   int64 // of bodies offered
	loadBefore, loadAfter                   string
	closeErr                                error
	meanBatch, offeredPerSec, writtenPerSec float64
}

// offerCaptures offers rate captures a second for d to a capture writer
// with the production defaults (queue 1024, batch 64, FullWait 100ms) over
// store, each from a goroutine of its own as requests do, then closes the
// writer (waiting at most a minute) and counts the captures stored.
func offerCaptures(t *testing.T, store *postgres.Store, db *pgx.Conn, rate int, d time.Duration) loadResult {
	t.Helper()
	ctx := context.Background()
	run := fmt.Sprintf("load%d", rate)
	c, reg := newCaptures(t, store, queue.Config{})
	runWriter(t, c)
	r := loadResult{rate: rate, offered: int(float64(rate) * d.Seconds()), loadBefore: loadavg()}
	var dropped atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range r.offered {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		rec := loadCapture(run, i)
		r.bytes += int64(len(rec.Request) + len(rec.Response))
		wg.Go(func() {
			if err := c.SaveCapture(ctx, rec); errors.Is(err, queue.ErrFull) {
				dropped.Add(1)
			} else if err != nil {
				t.Errorf("SaveCapture: %v", err)
			}
		})
	}
	r.took = time.Since(start)
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r.closeErr = c.Close(closeCtx)
	r.drained = time.Since(start)
	r.loadAfter = loadavg()
	r.dropped = int(dropped.Load())
	r.written = int(ledgerMetric(t, reg, "modelgate_capture_records_written_total"))
	r.writeErrors = int(ledgerMetric(t, reg, "modelgate_capture_write_errors_total"))
	r.batches = int(ledgerMetric(t, reg, "modelgate_capture_batch_records"))
	if got := int(ledgerMetric(t, reg, "modelgate_capture_records_dropped_total", "reason=full")); got != r.dropped {
		t.Errorf("dropped{reason=full} = %d, SaveCapture returned ErrFull %d times", got, r.dropped)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM captures WHERE request_id LIKE $1`, run+"-%").Scan(&r.stored); err != nil {
		t.Fatal(err)
	}
	if r.batches > 0 {
		r.meanBatch = float64(r.written) / float64(r.batches)
	}
	r.offeredPerSec = float64(r.offered) / r.took.Seconds()
	r.writtenPerSec = float64(r.written) / r.drained.Seconds()
	return r
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// openLoadStore opens the PostgreSQL store on a schema of the test's own,
// through a proxy adding rtt to every round trip when rtt is set, and a
// connection beside it for counting.
func openLoadStore(t *testing.T, rtt time.Duration) (*postgres.Store, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	u := pgtest.Schema(t)
	storeURL := u
	if rtt > 0 {
		pu, err := url.Parse(u)
		if err != nil || pu.Scheme == "" {
			t.Fatalf("-capture.load.rtt takes a postgres:// URL in %s, not %q", pgtest.URLEnv, u)
		}
		pu.Host = delayProxy(t, pu.Host, rtt/2)
		storeURL = pu.String()
	}
	store, err := postgres.Open(ctx, storeURL)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	db, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(ctx) })
	return store, db
}

// Through the PostgreSQL store, captures of realistic sizes offered far
// below what the writer can take, with a queue that holds them all, are
// all stored as they were offered: none is dropped, whatever the
// machine's speed.
func TestCapturesToPostgres(t *testing.T) {
	store, db := openLoadStore(t, 0)
	ctx := context.Background()
	const n, rate = 200, 50
	c, reg := newCaptures(t, store, queue.Config{QueueSize: n, FullWait: time.Minute})
	runWriter(t, c)
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / rate)); wait > 0 {
			time.Sleep(wait)
		}
		if err := c.SaveCapture(ctx, loadCapture("steady", i)); err != nil {
			t.Fatalf("SaveCapture(%d): %v", i, err)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := ledgerMetric(t, reg, "modelgate_capture_records_dropped_total"); got != 0 {
		t.Errorf("dropped = %v, want 0", got)
	}
	var stored int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM captures`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != n {
		t.Errorf("%d captures stored, want %d", stored, n)
	}
	for i := range n {
		want := loadCapture("steady", i)
		got, err := store.CaptureOf(ctx, want.RequestID)
		if err != nil {
			t.Fatalf("CaptureOf(%s): %v", want.RequestID, err)
		}
		if got != want {
			t.Fatalf("CaptureOf(%s) (-want +got):\n%s", want.RequestID, cmp.Diff(want, got))
		}
	}
}

// Through the PostgreSQL store, whose constraint refuses some captures:
// the others are all stored, the refused are counted, and none waits for
// a retry.
func TestCapturesRefusedByPostgres(t *testing.T) {
	store, db := openLoadStore(t, 0)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `ALTER TABLE captures ADD CONSTRAINT not_poison CHECK (model <> 'poison')`); err != nil {
		t.Fatal(err)
	}
	// A batch retried after a backoff of ten minutes would outlast
	// Close's deadline.
	c, reg := newCaptures(t, store, queue.Config{FlushInterval: time.Millisecond, MinBackoff: 10 * time.Minute})
	runWriter(t, c)
	const n = 300
	isPoison := func(i int) bool { return i%50 == 7 }
	for i := range n {
		rec := loadCapture("poison", i)
		if isPoison(i) {
			rec.Model = "poison"
		}
		if err := c.SaveCapture(ctx, rec); err != nil {
			t.Fatalf("SaveCapture(%d): %v", i, err)
		}
	}
	if err := c.Close(closeWithin(t, 2*time.Minute)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i := range n {
		_, err := store.CaptureOf(ctx, loadCapture("poison", i).RequestID)
		if want := !isPoison(i); (err == nil) != want {
			t.Errorf("CaptureOf(%d) = %v, want stored %v", i, err, want)
		}
	}
	for name, want := range map[string]float64{"modelgate_capture_records_dropped_total": n / 50,
		"modelgate_capture_write_errors_total": 0} {
		if got := ledgerMetric(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// TestCapturesLoadPostgres measures: for each rate of -capture.load it
// offers captures of realistic sizes for -capture.load.for to a capture
// writer with the production defaults over the PostgreSQL store (through
// a proxy adding -capture.load.rtt to each round trip, as a database
// across a network costs), and logs how many were dropped. It asserts
// only that every capture is accounted for (stored, or dropped and
// counted): how many a machine can take is not a test's business.
//
//	MODELGATE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test ./authz/ledger/queue -run TestCapturesLoadPostgres -v -capture.load 40,200,1000 -capture.load.rtt 2ms
func TestCapturesLoadPostgres(t *testing.T) {
	if *captureLoad == "" {
		t.Skip("-capture.load is unset: give it rates per second (e.g. 40,200,1000) to measure")
	}
	var rates []int
	for f := range strings.SplitSeq(*captureLoad, ",") {
		rate, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || rate <= 0 || rate > 10000 {
			t.Fatalf("-capture.load: %q is not a rate from 1 to 10000", f)
		}
		rates = append(rates, rate)
	}
	if *captureLoadFor <= 0 || *captureLoadFor > 2*time.Minute {
		t.Fatalf("-capture.load.for %v: want up to 2m", *captureLoadFor)
	}
	store, db := openLoadStore(t, *captureLoadRTT)
	loadBodies()
	for _, rate := range rates {
		r := offerCaptures(t, store, db, rate, *captureLoadFor)
		t.Logf("rtt %v, rate %d/s: offered %d (%.1f MiB of bodies) at %.0f/s in %v; dropped %d (%.1f%%); written %d, stored %d, "+
			"in %d batches of %.1f on average, %.0f/s until Close returned after %v; write errors %d; close: %v; load average %s -> %s",
			*captureLoadRTT, r.rate, r.offered, float64(r.bytes)/(1<<20), r.offeredPerSec, r.took.Round(time.Millisecond), r.dropped,
			100*float64(r.dropped)/float64(r.offered), r.written, r.stored, r.batches, r.meanBatch, r.writtenPerSec,
			r.drained.Round(time.Millisecond), r.writeErrors, r.closeErr, r.loadBefore, r.loadAfter)
		// Unless Close gave up on a batch in flight, whose commit may have
		// gone through.
		if r.closeErr == nil && (r.stored != r.written || r.written+r.dropped != r.offered) {
			t.Errorf("rate %d/s: %d stored, %d written, %d dropped of %d offered: captures unaccounted for",
				rate, r.stored, r.written, r.dropped, r.offered)
		}
	}
}

// delayProxy forwards connections from a loopback listener to addr, each
// byte delay later in either direction, and returns its address: a
// database across a network, whose round trips a writer pays for.
func delayProxy(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go delayCopy(up, c, delay)
			go delayCopy(c, up, delay)
		}
	}()
	return ln.Addr().String()
}

// delayCopy copies src to dst, each read delivered delay after it came,
// and closes both when either ends.
func delayCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				chunks <- chunk{b[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	for range chunks { // until the reader sees src closed
	}
}
