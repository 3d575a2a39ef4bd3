package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"modelgate/cmd/mockprovider/guards"
)

// server is one ext_proc server under test, in a process of its own.
type server struct {
	name    string
	cmd     *exec.Cmd
	conns   []*grpc.ClientConn // one for each of Envoy's workers
	driver  *driver
	pprof   string // host:port serving /debug/pprof/
	stderr  bytes.Buffer
	sqlite  string // the gateway's database
	account string // the account the key belongs to
}

// freeAddr returns a loopback address nothing listens on (just now).
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// benchConfig is a gateway as `modelgate serve` runs it: SQLite store,
// the usage ledger, in-memory rate limits that every request passes
// through (high enough never to refuse), one OpenAI backend. Its
// guardrails read models gpt-4o-regex and gpt-4o-service, gpt-4o's
// deployment under other ids: a request rule and a response rule of
// regular expressions, and the same with an LLM judge (its URL the last
// argument) as the check. gpt-4o has none.
const benchConfig = `server:
  grpc_listen: %s
  admin_listen: %s
  shutdown_grace: 5s
storage:
  sqlite_path: %s
rate_limits:
  store: memory
  key: {requests_per_minute: 100000000, tokens_per_minute: 100000000000, concurrent_requests: 10000}
backends:
  - name: openai-main
    provider: openai
    base_url: https://api.openai.com
    api_key_env: EXTPROCBENCH_OPENAI_KEY
models:
  - id: gpt-4o
    owned_by: openai
    deployments:
      - {backend: openai-main, model: gpt-4o-2024-08-06}
  - id: gpt-4o-regex
    owned_by: openai
    deployments:
      - {backend: openai-main, model: gpt-4o-2024-08-06}
  - id: gpt-4o-service
    owned_by: openai
    deployments:
      - {backend: openai-main, model: gpt-4o-2024-08-06}
guardrails:
  services:
    - {name: slow-judge, type: llm_judge, url: %q, model: judge, api_key_env: EXTPROCBENCH_OPENAI_KEY, timeout: 2s}
  rules:
    - {name: in-regex, phase: request, regex: {patterns: ["(?i)forbidden-word|zebra-[0-9]+"]}, action: block, models: [gpt-4o-regex]}
    - {name: out-regex, phase: response, regex: {patterns: ["(?i)forbidden-word|zebra-[0-9]+"]}, action: block, models: [gpt-4o-regex]}
    - {name: in-service, phase: request, service: slow-judge, action: block, models: [gpt-4o-service]}
    - {name: out-service, phase: response, service: slow-judge, action: block, models: [gpt-4o-service]}
`

// startModelgate runs `modelgate serve` from bin with a key of its own,
// its guard service the LLM judge at judgeURL.
func startModelgate(ctx context.Context, bin, dir, judgeURL string) (*server, error) {
	grpcAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	adminAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "modelgate.yaml")
	db := filepath.Join(dir, "modelgate.db")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, benchConfig, grpcAddr, adminAddr, db, judgeURL), 0o600); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "EXTPROCBENCH_OPENAI_KEY=sk-upstream-bench", "MODELGATE_PPROF=1")
	create := exec.CommandContext(ctx, bin, "keys", "create", "--config", cfg, "--account", "bench")
	create.Env = env
	out, err := create.Output()
	if err != nil {
		return nil, fmt.Errorf("modelgate keys create: %w", err)
	}
	s := &server{name: "modelgate", pprof: adminAddr, sqlite: db, account: "bench"}
	s.cmd = exec.Command(bin, "serve", "--config", cfg)
	s.cmd.Env = env
	s.cmd.Stderr = &s.stderr
	if err := s.start(ctx, grpcAddr); err != nil {
		return nil, err
	}
	s.driver = &driver{clients: s.clients(), key: strings.TrimSpace(string(out)), translates: true}
	return s, nil
}

// startGuards serves the guard services' emulators
// (cmd/mockprovider/guards) on a loopback port of this process. It
// returns the server and the base URL of the LLM judge's slow fault
// switch, which answers after guards.Slow.
func startGuards() (*http.Server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: guards.Handler("/guard"), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l) //nolint:errcheck // ErrServerClosed once closed
	return srv, "http://" + l.Addr().String() + "/guard/faults/slow/judge/v1", nil
}

// startNoop runs the no-op server in a child process of this program.
func startNoop(ctx context.Context) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &server{name: "no-op", pprof: pprofAddr}
	s.cmd = exec.Command(self)
	s.cmd.Env = append(os.Environ(), noopEnv+"="+addr, noopPprofEnv+"="+pprofAddr,
		noopKindEnv+"="+floorKind, noopGOGCEnv+"="+floorGOGC)
	s.cmd.Stderr = &s.stderr
	if err := s.start(ctx, addr); err != nil {
		return nil, err
	}
	s.driver = &driver{clients: s.clients(), key: "sk-none"}
	return s, nil
}

// envoyWorkers is how many connections Envoy opens to the server: one
// for each worker thread, whose connection pools are its own, and Envoy
// runs as many workers as the machine has hardware threads unless told
// otherwise (--concurrency). A worker's exchanges all go through its own
// connection; -connections sets it.
var envoyWorkers = runtime.NumCPU()

// The floor the benchmark starts: floorKind "" is the cheapest legal
// server (noop.go), "proto" the former one (-floor); floorGOGC, when
// set, its GOGC (-noop-gogc).
var floorKind, floorGOGC string

func (s *server) clients() []extprocv3.ExternalProcessorClient {
	cs := make([]extprocv3.ExternalProcessorClient, len(s.conns))
	for i, c := range s.conns {
		cs[i] = extprocv3.NewExternalProcessorClient(c)
	}
	return cs
}

// envoyWindow is Envoy's default initial stream and connection window
// (Http2ProtocolOptions.initial_stream_window_size).
const envoyWindow = 256 << 20

// start starts the process and waits until its gRPC health service
// answers SERVING.
func (s *server) start(ctx context.Context, addr string) error {
	if err := s.cmd.Start(); err != nil {
		return err
	}
	for range envoyWorkers {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			// Envoy's HTTP/2 windows (256 MiB by default) and no BDP pings,
			// which grpc-go sends when its windows are left to it.
			grpc.WithInitialWindowSize(envoyWindow), grpc.WithInitialConnWindowSize(envoyWindow))
		if err != nil {
			s.stop()
			return err
		}
		s.conns = append(s.conns, conn)
	}
	health := healthpb.NewHealthClient(s.conns[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return fmt.Errorf("%s did not start serving: %v\n%s", s.name, err, s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the process the way a deployment does (SIGTERM: the gateway
// drains and flushes its ledger) and waits for it.
func (s *server) stop() error {
	for _, c := range s.conns {
		c.Close()
	}
	s.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may be gone already
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && s.name == "no-op" { // killed by the signal: its normal end
			return nil
		}
		return err
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill() //nolint:errcheck // best effort
		return fmt.Errorf("%s did not stop within 20s", s.name)
	}
}

// cpu is the process's CPU time so far, user and system (Linux).
func (s *server) cpu() (time.Duration, error) {
	return processCPU(s.cmd.Process.Pid)
}

// sampleRSS records the process's largest resident set (VmRSS) every
// 100 ms, from now until stop returns.
func (s *server) sampleRSS() (stop func(), rss *atomic.Int64) {
	rss = new(atomic.Int64)
	quit, done := make(chan struct{}), make(chan struct{})
	path := "/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/status"
	sample := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		_, after, ok := bytes.Cut(b, []byte("VmRSS:"))
		if !ok {
			return
		}
		f := strings.Fields(string(after))
		if len(f) < 2 || f[1] != "kB" {
			return
		}
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb<<10 > rss.Load() {
			rss.Store(kb << 10)
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(quit); <-done; sample() }, rss
}

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading process CPU time (Linux only): %w", err)
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// machineCPU is the machine's busy and total CPU time so far, in clock
// ticks, from /proc/stat's first line (Linux; zeros elsewhere).
func machineCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle and iowait
			busy += n
		}
	}
	return busy, total
}

// profile fetches a CPU profile of seconds from the server's pprof into
// path.
func (s *server) profile(ctx context.Context, seconds int, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.pprof, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s pprof: %s", s.name, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
