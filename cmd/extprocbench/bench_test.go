package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"modelgate/authz/ledger"
	"modelgate/authz/sqlite"
)

// The test binary is also the no-op server the benchmark starts.
func TestMain(m *testing.M) {
	if addr := os.Getenv(noopEnv); addr != "" {
		if err := serveNoop(addr, os.Getenv(noopPprofEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "no-op server:", err)
			os.Exit(1)
		}
		return
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildDir  string
	builtBin  string
	buildErr  error
)

// modelgateBinary builds cmd/modelgate once for the package's tests.
func modelgateBinary(tb testing.TB) string {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skip("process CPU time is read from /proc: Linux only")
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "extprocbench-test"); buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "modelgate")
		out, err := exec.Command("go", "build", "-o", builtBin, "modelgate/cmd/modelgate").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return builtBin
}

// Both servers take every exchange of every scenario as Envoy needs
// (the driver checks each reply, and that a streamed answer's text
// reaches the client), and the gateway charges each one with the answer's
// tokens and runs the rules of its model, which let it through: what the
// benchmark measures is real work.
func TestDriverAgainstBothServers(t *testing.T) {
	bin := modelgateBinary(t)
	ctx := context.Background()
	dir := t.TempDir()
	b, err := newBench(ctx, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.close() }) //nolint:errcheck // checked below when the test gets there
	const n = 12
	tokens := map[string]int64{"json": 152, "stream": 195, // the answers' total_tokens
		"json+regex": 152, "stream+regex": 195, "stream+service": 195}
	var want int64
	for _, sc := range scenarios() {
		for _, c := range []int{1, 4} {
			for _, s := range []*server{b.noop, b.modelgate} {
				r, err := measure(ctx, s, &sc, c, 0, time.Minute, n, "")
				if err != nil {
					t.Fatal(err)
				}
				if r.exchanges != n {
					t.Errorf("%s %s c=%d: %d exchanges, want %d", s.name, sc.name, c, r.exchanges, n)
				}
				if (r.ttft > 0) != sc.streamed {
					t.Errorf("%s %s c=%d: time to first text %v", s.name, sc.name, c, r.ttft)
				}
			}
			want += n * tokens[sc.name]
		}
	}
	if err := b.close(); err != nil { // SIGTERM: the gateway flushes its ledger
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, b.modelgate.sqlite)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, err := store.AccountByName(ctx, b.modelgate.account)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.UsageSince(ctx, acct.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	requests := int64(len(scenarios()) * 2 * n)
	if got.Requests != requests || got.TotalTokens != want {
		t.Errorf("ledger: %d requests, %d tokens; want %d, %d", got.Requests, got.TotalTokens, requests, want)
	}
	recs, err := store.ListRequests(ctx, ledger.RequestQuery{AccountID: acct.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	checkGuardrails(t, recs, int(requests))
}

// checkGuardrails checks that each of the n requests recs holds ran its
// model's two rules, both allowing it, and other models' none.
func checkGuardrails(t *testing.T, recs []ledger.UsageRecord, n int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("ledger: %d request records, want %d", len(recs), n)
	}
	allowed := func(in, out string) []ledger.GuardOutcome {
		return []ledger.GuardOutcome{{Rule: in, Phase: "request", Result: ledger.GuardAllowed}, {Rule: out, Phase: "response", Result: ledger.GuardAllowed}}
	}
	want := map[string][]ledger.GuardOutcome{"gpt-4o": nil,
		"gpt-4o-regex": allowed("in-regex", "out-regex"), "gpt-4o-service": allowed("in-service", "out-service")}
	for _, r := range recs {
		w, ok := want[r.Model]
		if !ok || !slices.Equal(r.Guardrails, w) {
			t.Errorf("%s (%s): guardrails %v, want %v", r.RequestID, r.Model, r.Guardrails, w)
		}
	}
}

// BenchmarkFloor runs b.N exchanges against each server per scenario and
// concurrency and reports both servers' CPU per exchange, the gateway's
// ratios to the no-op server and, of streamed answers, both servers' time
// to first text (cmd/extprocbench prints the same as a table, over
// rounds). An exchange of stream+service takes some 270 ms (its guard
// service's answers): leave it out of long runs.
//
//	go test ./cmd/extprocbench -run XXX -bench 'Floor/^(json|stream)$' -benchtime 3000x -count 3
func BenchmarkFloor(b *testing.B) {
	bin := modelgateBinary(b)
	ctx := context.Background()
	bench, err := newBench(ctx, bin, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer bench.close()
	for _, sc := range scenarios() {
		for _, c := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/c%d", sc.name, c), func(b *testing.B) {
				var rs [2]result
				for i, s := range []*server{bench.noop, bench.modelgate} {
					r, err := measure(ctx, s, &sc, c, 200*time.Millisecond, time.Hour, int64(b.N), "")
					if err != nil {
						b.Fatal(err)
					}
					rs[i] = r
				}
				b.ReportMetric(rs[0].cpuPerExchange(), "noop-cpu-µs/exch")
				b.ReportMetric(rs[1].cpuPerExchange(), "cpu-µs/exch")
				b.ReportMetric(rs[1].cpuPerExchange()/rs[0].cpuPerExchange(), "cpu-ratio")
				b.ReportMetric(rs[1].throughput()/rs[0].throughput(), "throughput-ratio")
				if sc.streamed {
					b.ReportMetric(rs[0].ttftMillis(), "noop-ttft-ms")
					b.ReportMetric(rs[1].ttftMillis(), "ttft-ms")
				}
			})
		}
	}
}
