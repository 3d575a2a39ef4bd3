// Command extprocbench measures the gateway's own cost: it plays Envoy's
// side of the ext_proc protocol over loopback gRPC against `modelgate
// serve` and against the cheapest legal ext_proc server (the floor,
// noop.go), each in a process of its own, and reports for each scenario
// and concurrency the CPU time each server's process spends per exchange
// and the exchanges per second, and the gateway's ratio to the floor.
//
//	go run ./cmd/extprocbench                 # 3 rounds, medians
//	go run ./cmd/extprocbench -profile-dir /tmp/prof -rounds 1
//
// An exchange is one HTTP request: request headers, buffered request body,
// response headers and the response body, buffered (chat JSON) or
// streamed in 310 pieces cut at random places (a 100-chunk chat stream).
// Scenarios json and stream are those exchanges unguarded; json+regex and
// stream+regex the same read by guardrail rules of regular expressions,
// stream+service by a guard service that answers in 50 ms (served by
// this process), none of them matching. Of streamed answers it also
// reports the median time to first text: from the request's headers to
// the reply that lets the answer's first text through to the client. The
// driver sends all of an answer's pieces at once, so that is the server's
// own time, not a model's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	if addr := os.Getenv(noopEnv); addr != "" {
		if err := serveNoop(addr, os.Getenv(noopPprofEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "no-op server:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.modelgate, "modelgate", "", "the modelgate binary (default: go build ./cmd/modelgate)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; the table shows each value's median")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "how long each server runs each scenario per round")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured traffic before each measurement")
	conc := flag.String("concurrency", "1,16", "concurrent exchanges, comma-separated")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write CPU profiles of both servers and of the driver (first round) to this folder")
	flag.StringVar(&o.scenario, "scenario", "", "run only this scenario (json, stream, json+regex, stream+regex or stream+service)")
	flag.IntVar(&envoyWorkers, "connections", envoyWorkers, "gRPC connections to each server (Envoy: one per worker thread, as many as the machine's hardware threads)")
	flag.StringVar(&floorKind, "floor", "", `the floor: "" the cheapest legal ext_proc server, "proto" the former one (gRPC's defaults, extproctest.Noop)`)
	flag.StringVar(&floorGOGC, "noop-gogc", "", "the floor's GOGC (default: noopGOGC)")
	flag.Parse()
	known := slices.ContainsFunc(scenarios(), func(sc scenario) bool { return sc.name == o.scenario })
	if envoyWorkers < 1 || (floorKind != "" && floorKind != "proto") || (o.scenario != "" && !known) {
		flag.Usage()
		os.Exit(2)
	}
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "-concurrency: %q is not a positive number\n", f)
			os.Exit(2)
		}
		o.concurrency = append(o.concurrency, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "extprocbench:", err)
		os.Exit(1)
	}
}

type options struct {
	modelgate   string
	rounds      int
	duration    time.Duration
	warmup      time.Duration
	concurrency []int
	profileDir  string
	scenario    string // empty: all
}

func run(ctx context.Context, o options, out io.Writer) error {
	dir, err := os.MkdirTemp("", "extprocbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.modelgate == "" {
		o.modelgate = filepath.Join(dir, "modelgate")
		fmt.Fprintln(out, "building modelgate ...")
		build := exec.CommandContext(ctx, "go", "build", "-o", o.modelgate, "modelgate/cmd/modelgate")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build: %w", err)
		}
	}
	b, err := newBench(ctx, o.modelgate, dir)
	if err != nil {
		return err
	}
	defer b.close()
	var results []result
	for round := range o.rounds {
		for _, sc := range scenarios() {
			if o.scenario != "" && sc.name != o.scenario {
				continue
			}
			for _, c := range o.concurrency {
				pair := [2]*server{b.noop, b.modelgate}
				if round%2 == 1 { // either server may gain from going second
					pair[0], pair[1] = pair[1], pair[0]
				}
				for _, s := range pair {
					profile := ""
					if o.profileDir != "" && round == 0 {
						profile = filepath.Join(o.profileDir, fmt.Sprintf("%s-%s-c%d.pprof", s.name, sc.name, c))
					}
					r, err := measure(ctx, s, &sc, c, o.warmup, o.duration, 0, profile)
					if err != nil {
						return err
					}
					fmt.Fprintf(os.Stderr, "round %d %-9s %-14s c=%-3d %8.0f exchanges/s %8.1f µs CPU/exchange, ttft %.2f ms (driver %.1f µs, machine idle %2.0f%%, server RSS %.0f MiB)\n",
						round+1, s.name, sc.name, c, r.throughput(), r.cpuPerExchange(), r.ttftMillis(),
						float64(r.driverCPU.Microseconds())/float64(max(r.exchanges, 1)), 100*r.idle, float64(r.rss)/(1<<20))
					results = append(results, r)
				}
			}
		}
	}
	writeTable(out, results, o.rounds)
	return nil
}

// bench is the two servers under test, and the guard service the
// gateway's rules call.
type bench struct {
	noop, modelgate *server
	guards          *http.Server
	closeOnce       sync.Once
	closeErr        error
}

func newBench(ctx context.Context, bin, dir string) (*bench, error) {
	guardSrv, judgeURL, err := startGuards()
	if err != nil {
		return nil, err
	}
	noop, err := startNoop(ctx)
	if err != nil {
		guardSrv.Close()
		return nil, err
	}
	mg, err := startModelgate(ctx, bin, dir, judgeURL)
	if err != nil {
		noop.stop() //nolint:errcheck // failing anyway
		guardSrv.Close()
		return nil, err
	}
	return &bench{noop: noop, modelgate: mg, guards: guardSrv}, nil
}

// close stops both servers; later calls return the first one's error.
func (b *bench) close() error {
	b.closeOnce.Do(func() {
		err1 := b.noop.stop()
		err2 := b.modelgate.stop()
		if err2 != nil {
			err2 = fmt.Errorf("%w\n%s", err2, b.modelgate.stderr.String())
		}
		b.closeErr = errors.Join(err1, err2, b.guards.Close())
	})
	return b.closeErr
}

// result is one measurement of one server.
type result struct {
	server, scenario string
	concurrency      int
	exchanges        int64
	cpu, wall        time.Duration
	// driverCPU is this process's CPU time meanwhile (the Envoy side) and
	// idle the machine's idle share: together they tell whether the
	// throughput was bound by the machine's CPU.
	driverCPU time.Duration
	idle      float64
	// rss is the server's largest resident set seen meanwhile (sampled
	// every 100 ms).
	rss int64
	// ttft is the median time to first text of a streamed answer's
	// exchanges (driver.exchange); zero for a JSON answer.
	ttft time.Duration
}

func (r result) cpuPerExchange() float64 {
	return float64(r.cpu.Microseconds()) / float64(max(r.exchanges, 1))
}

func (r result) throughput() float64 { return float64(r.exchanges) / r.wall.Seconds() }

func (r result) ttftMillis() float64 { return float64(r.ttft) / float64(time.Millisecond) }

// measure runs c workers playing exchanges against s: for warmup
// unmeasured, then until duration has passed or, if n > 0, n exchanges
// are done. With profile set, it records a CPU profile meanwhile.
func measure(ctx context.Context, s *server, sc *scenario, c int, warmup, duration time.Duration, n int64, profile string) (result, error) {
	if warmup > 0 {
		if _, _, err := drive(ctx, s, sc, c, time.Now().Add(warmup), 0); err != nil {
			return result{}, err
		}
	}
	var profiled chan error
	if profile != "" {
		profiled = make(chan error, 1)
		secs := max(1, int(duration/time.Second))
		go func() { profiled <- s.profile(ctx, secs, profile) }()
	}
	if profile != "" { // the driver's own, beside the server's
		f, err := os.Create(strings.TrimSuffix(profile, ".pprof") + "-driver.pprof")
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0, err := s.cpu()
	if err != nil {
		return result{}, err
	}
	driver0, err := processCPU(os.Getpid())
	if err != nil {
		return result{}, err
	}
	busy0, total0 := machineCPU()
	stopRSS, rss := s.sampleRSS()
	start := time.Now()
	done, ttft, err := drive(ctx, s, sc, c, start.Add(duration), n)
	wall := time.Since(start)
	stopRSS()
	if err != nil {
		return result{}, err
	}
	cpu1, err := s.cpu()
	if err != nil {
		return result{}, err
	}
	driver1, err := processCPU(os.Getpid())
	if err != nil {
		return result{}, err
	}
	busy1, total1 := machineCPU()
	idle := 0.0
	if total1 > total0 {
		idle = 1 - float64(busy1-busy0)/float64(total1-total0)
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			return result{}, err
		}
	}
	return result{server: s.name, scenario: sc.name, concurrency: c, exchanges: done, cpu: cpu1 - cpu0, wall: wall,
		driverCPU: driver1 - driver0, idle: idle, rss: rss.Load(), ttft: ttft}, nil
}

// exchangeSeq numbers the exchanges of the process, so that each has a
// request id (and, in a unique scenario, a request text) of its own.
var exchangeSeq atomic.Int64

// drive runs c workers until deadline or, with n > 0, until n exchanges
// are done; it returns how many were, their median time to first text
// (streamed answers) and the first failure.
func drive(ctx context.Context, s *server, sc *scenario, c int, deadline time.Time, n int64) (int64, time.Duration, error) {
	var (
		done, next atomic.Int64
		wg         sync.WaitGroup
		errOnce    sync.Once
		firstErr   error
		ttfts      = make([][]float64, c) // each worker's
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := next.Add(1)
				if n > 0 && i > n {
					return
				}
				ttft, err := s.driver.exchange(ctx, sc, w, "bench-"+strconv.Itoa(w)+"-"+strconv.FormatInt(exchangeSeq.Add(1), 10))
				if err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = fmt.Errorf("%s, %s, exchange %d: %w", s.name, sc.name, i, err); cancel() })
					}
					return
				}
				done.Add(1)
				if sc.streamed {
					ttfts[w] = append(ttfts[w], float64(ttft))
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil && n == 0 {
		firstErr = ctx.Err()
	}
	return done.Load(), time.Duration(medianOf(slices.Concat(ttfts...))), firstErr
}

// writeTable prints the medians of the rounds: throughput and CPU per
// exchange of both servers and the gateway's ratios to the floor.
func writeTable(out io.Writer, results []result, rounds int) {
	type cell struct {
		scenario string
		c        int
	}
	var cells []cell
	by := map[cell]map[string][]result{}
	for _, r := range results {
		k := cell{r.scenario, r.concurrency}
		if by[k] == nil {
			by[k] = map[string][]result{}
			cells = append(cells, k)
		}
		by[k][r.server] = append(by[k][r.server], r)
	}
	fmt.Fprintf(out, "\nmedians of %d round(s); the ratios are the medians of each round's\n", rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tconcurrency\tno-op exch/s\tmodelgate exch/s\tthroughput ratio\tno-op CPU µs/exch\tmodelgate CPU µs/exch\tCPU ratio\tno-op ttft ms\tmodelgate ttft ms\t")
	for _, k := range cells {
		noop, mg := by[k]["no-op"], by[k]["modelgate"]
		nt, mt := median(noop, result.throughput), median(mg, result.throughput)
		nc, mc := median(noop, result.cpuPerExchange), median(mg, result.cpuPerExchange)
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.2f\t%s\t%s\t\n", k.scenario, k.c, nt, mt,
			pairedRatio(noop, mg, result.throughput), nc, mc, pairedRatio(noop, mg, result.cpuPerExchange),
			ttftCell(noop), ttftCell(mg))
	}
	tw.Flush()
}

// ttftCell is the median time to first text of rs in ms, "-" for a JSON
// answer's.
func ttftCell(rs []result) string {
	if len(rs) == 0 || rs[0].ttft == 0 {
		return "-"
	}
	return strconv.FormatFloat(median(rs, result.ttftMillis), 'f', 2, 64)
}

// pairedRatio is the median of f's ratio of mg to noop within each
// round. The two servers of a round ran back to back, so a ratio within a
// round is spared the drift of a shared machine's speed between rounds,
// which a ratio of the two medians is not.
func pairedRatio(noop, mg []result, f func(result) float64) float64 {
	v := make([]float64, min(len(noop), len(mg)))
	for i := range v {
		v[i] = f(mg[i]) / f(noop[i])
	}
	return medianOf(v)
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
