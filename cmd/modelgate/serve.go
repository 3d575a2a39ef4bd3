package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"modelgate/authz"
	"modelgate/authz/ledger/queue"
	"modelgate/authz/pricing"
	"modelgate/extproc"
	"modelgate/extproc/config"
	"modelgate/extproc/wire"
)

func runServe(ctx context.Context, args []string, e env) error {
	c := newCommand("serve", e, cmdHelp{
		synopsis: "modelgate serve --config F [--grpc-listen ADDR] [--admin-listen ADDR] [--sqlite-path PATH]",
		about: `Runs the production gateway: the ext_proc gRPC server Envoy calls (see
'modelgate envoy-config'), with the gRPC health service (grpc.health.v1),
and the admin endpoint with /metrics, /healthz (liveness), /readyz
(readiness: 200 once the store answers, 503 while it does not and while
draining) and, when the admin token's variable is set, the admin API and
dashboard under /admin/. A PostgreSQL store that cannot be reached yet is
retried meanwhile. On SIGINT or SIGTERM it turns not ready at once, refuses
new connections, lets the open streams finish for up to
server.shutdown_grace (default 10m), then cuts the rest. The flags override
the config's values; --grpc-listen does not change envoy.ext_proc_address,
where Envoy looks for this server.`,
		example: "modelgate serve --config modelgate.yaml --grpc-listen 0.0.0.0:50051 --admin-listen 0.0.0.0:8081",
	})
	path := c.String("config", "", "`F` the configuration file (required)")
	grpcListen := c.String("grpc-listen", "", "`ADDR` the ext_proc gRPC address (default: server.grpc_listen, else 127.0.0.1:50051)")
	adminListen := c.String("admin-listen", "", "`ADDR` the admin address (default: server.admin_listen, else 127.0.0.1:8081)")
	sqlitePath := c.String("sqlite-path", "", "`PATH` the SQLite database (default: storage.sqlite_path, else modelgate.db)")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.require("config", *path); err != nil {
		return err
	}
	if err := c.noArgs(); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if err := overrideServe(cfg, *grpcListen, *adminListen, *sqlitePath); err != nil {
		return err
	}
	log := newLogger(e.stderr)
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush
	g, err := prepareGateway(cfg, e.getenv, log)
	if err != nil {
		return err
	}
	requests := bufferedLogger(e.stderr)
	defer requests.Sync() //nolint:errcheck // nothing to do about a failed flush
	g.ecfg.RequestLogger = requests.Named("extproc")
	grpcL, adminL, err := listenPair(cfg.Server.GRPCListen, cfg.Server.AdminListen)
	if err != nil {
		g.closeLimiter()                    //nolint:errcheck // failing anyway
		g.closeTracer(context.Background()) //nolint:errcheck // failing anyway
		return err
	}
	// Probes get answers (not ready) while the store is being opened.
	g.start(grpcL, adminL)
	addrs := []zap.Field{zap.String("grpc", grpcL.Addr().String()), zap.String("admin", adminL.Addr().String())}
	log.Info("listening", addrs...)
	store, err := waitForStore(ctx, cfg, e.getenv, g.ready, log)
	if err == nil {
		defer store.Close() // after stop has flushed the ledger
		err = g.attach(store, e.getenv)
	}
	if err == nil {
		log.Info("serving", addrs...)
		err = g.wait(ctx)
	}
	g.stop()
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) { // stopped while waiting for the store
		return nil
	}
	return err
}

// overrideServe applies serve's flags over the config; empty means unset.
func overrideServe(cfg *config.Config, grpcListen, adminListen, sqlitePath string) error {
	if sqlitePath != "" && cfg.Storage.PostgresURLEnv != "" {
		return fmt.Errorf("--sqlite-path: the config stores in PostgreSQL (storage.postgres_url_env), not SQLite")
	}
	for _, o := range []struct {
		to *string
		v  string
	}{
		{&cfg.Server.GRPCListen, grpcListen}, {&cfg.Server.AdminListen, adminListen}, {&cfg.Storage.SQLitePath, sqlitePath},
	} {
		if o.v != "" {
			*o.to = o.v
		}
	}
	return nil
}

// newLogger logs JSON lines at Info and above to w.
func newLogger(w io.Writer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.InfoLevel))
}

// bufferedLogger is newLogger writing through a buffer flushed every
// second (and by Sync): for the line each request ends with, which would
// otherwise cost a busy gateway a write to w per request.
func bufferedLogger(w io.Writer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	ws := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(w), Size: 256 << 10, FlushInterval: time.Second}
	return zap.New(zapcore.NewCore(enc, ws, zapcore.InfoLevel))
}

// gateway is the ext_proc gRPC server and the admin HTTP server.
type gateway struct {
	cfg   *config.Config
	grpc  *grpc.Server
	admin *http.Server
	mux   *http.ServeMux
	reg   *prometheus.Registry
	log   *zap.Logger
	// ecfg is the ext_proc server's config; attach adds the store's parts.
	ecfg extproc.Config
	// proc answers ext_proc streams once attach has given it a server.
	proc    *processor
	health  *health.Server
	ready   *readiness
	streams *streamCount
	// grace is how long stop lets open ext_proc streams run on.
	grace time.Duration

	// ledger queues usage records off the request path; stop flushes it.
	// Nil until attach.
	ledger       *queue.Ledger
	closeLimiter func() error
	// closeTracer flushes the spans not yet exported and stops tracing.
	closeTracer func(context.Context) error
	// capture is where payload captures go: a queue to the store, a
	// file, or nothing; zero before attach.
	capture     captureSink
	pingLimiter func(context.Context) error // nil for the in-memory limiter
	// stopBudgets ends the ext_proc server's Run, which makes the budget
	// charges Redis failed to make, after its last try. Nil until attach.
	stopBudgets func()

	errc       chan error
	grpcClosed chan struct{} // closed once the gRPC listener is
	quit       chan struct{} // closed when stop begins
	stopOnce   sync.Once
}

// newGateway returns a gateway on store, ready once started.
func newGateway(cfg *config.Config, store authz.Store, getenv func(string) string, log *zap.Logger) (*gateway, error) {
	g, err := prepareGateway(cfg, getenv, log)
	if err != nil {
		return nil, err
	}
	if err := g.attach(store, getenv); err != nil {
		g.closeLimiter()                    //nolint:errcheck // failing anyway
		g.closeTracer(context.Background()) //nolint:errcheck // failing anyway
		return nil, err
	}
	return g, nil
}

// prepareGateway builds everything that needs no store and checks the
// credentials. Until attach, the gateway answers probes (not ready) and
// refuses ext_proc streams with UNAVAILABLE.
func prepareGateway(cfg *config.Config, getenv func(string) string, log *zap.Logger) (*gateway, error) {
	ecfg, err := extprocConfig(cfg, getenv, log.Named("extproc"))
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if ecfg.Metrics, err = extproc.NewMetricsWith(reg, extproc.MetricsConfig{AccountLabels: cfg.Observability.Metrics.AccountLabels}); err != nil {
		return nil, err
	}
	tracer, closeTracer, err := newTracer(context.Background(), cfg, getenv)
	if err != nil {
		return nil, fmt.Errorf("observability.tracing: %w", err)
	}
	ecfg.Tracer = tracer
	closeLimiter, pingLimiter, err := newLimiter(cfg, &ecfg, getenv)
	if err != nil {
		return nil, err
	}
	g := &gateway{cfg: cfg, reg: reg, log: log, ecfg: ecfg, proc: &processor{}, health: health.NewServer(),
		streams: &streamCount{}, grace: cfg.Server.ShutdownGrace.Duration, closeLimiter: closeLimiter, pingLimiter: pingLimiter,
		closeTracer: closeTracer,
		errc:        make(chan error, 2), grpcClosed: make(chan struct{}), quit: make(chan struct{})}
	g.ready = newReadiness(g.health, log)
	registerStreamStats(reg, g.streams, cfg.Envoy.MaxRequestsInFlight)
	// WaitForHandlers: the hard stop returns once every cut stream has
	// handed its usage record to the ledger.
	g.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(grpcMaxMessage(cfg)), grpc.MaxSendMsgSize(grpcMaxMessage(cfg)),
		grpc.StreamInterceptor(g.streams.intercept), grpc.WaitForHandlers(true),
		grpc.NumStreamWorkers(extproc.StreamWorkers()), grpc.ForceServerCodecV2(wire.Codec()),
		grpc.StaticStreamWindowSize(streamWindow), grpc.StaticConnWindowSize(connWindow))
	extprocv3.RegisterExternalProcessorServer(g.grpc, g.proc)
	healthpb.RegisterHealthServer(g.grpc, g.health)
	g.mux = http.NewServeMux()
	g.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	g.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n")) //nolint:errcheck // best effort
	})
	g.mux.HandleFunc("GET /readyz", g.readyz)
	if getenv(pprofEnv) == "1" {
		mountPprof(g.mux)
	}
	g.admin = &http.Server{Handler: g.mux, ReadHeaderTimeout: 10 * time.Second}
	return g, nil
}

// attach puts the gateway on its store: the key cache, the usage ledger,
// the ext_proc server and the admin API; then it is ready if the store
// (and, failing closed, Redis) answers.
func (g *gateway) attach(store authz.Store, getenv func(string) string) error {
	ecfg := g.ecfg
	if rs, ok := store.(extproc.ResponseStore); ok { // stores that keep response state
		ecfg.Responses = rs
	}
	if is, ok := store.(extproc.ImageStore); ok {
		ecfg.Images = is
	}
	capture, sink, err := captureConfig(g.cfg, store, g.reg, g.log.Named("capture"))
	if err != nil {
		return err
	}
	ecfg.Capture = capture
	base, _ := ecfg.Prices.(*pricing.Table) // as extprocConfig made it
	prices := newLivePrices(base, store, g.log.Named("prices"))
	prices.reload(context.Background())
	ecfg.Prices = prices
	// Budgets whose counters were lost (a restart on the memory limiter,
	// a Redis that came back empty) are rebuilt from the ledger, for the
	// gateway and the dashboard alike.
	ecfg.Spender = extproc.LedgerSpender(ecfg.Spender, store)
	auth := authz.NewAuthenticator(store, authz.AuthenticatorConfig{})
	ledger, err := queue.New(store, g.reg, queue.Config{Logger: g.log.Named("ledger")})
	if err != nil {
		return err
	}
	srv, err := extproc.New(ecfg, auth, ledger)
	if err != nil {
		return err
	}
	if err := mountAdmin(g.mux, g.cfg, store, auth, prices, ecfg.Spender, getenv, g.log); err != nil {
		return err
	}
	registerAuthStats(g.reg, auth)
	g.ledger = ledger
	// Not a request's context: the ledger takes the records of the
	// requests stop waits for, until stop closes it.
	go g.ledger.Run(context.Background()) //nolint:errcheck // fails only if stop closed it first
	g.capture = sink
	g.capture.run()
	// Budget charges Redis failed to make are made as soon as it answers
	// again; stop ends this once every request has settled.
	budgets, stopBudgets := context.WithCancel(context.Background())
	budgetsDone := make(chan struct{})
	go func() {
		defer close(budgetsDone)
		srv.Run(budgets) //nolint:errcheck // ends with budgets, logging what it loses
	}()
	g.stopBudgets = func() { stopBudgets(); <-budgetsDone }
	g.proc.srv.Store(srv)
	probes := []probe{{reasonStore, pingStore(store)}}
	// Failing open, requests go on while Redis is down: that is no reason
	// to take the replica out of rotation.
	if g.pingLimiter != nil && g.cfg.RateLimits.FailClosed {
		probes = append(probes, probe{reasonLimiter, g.pingLimiter})
	}
	g.ready.attach(probes)
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	g.ready.check(ctx)
	go g.watchReadiness()
	go prices.watch(g.quit)
	captureDays := 0
	if g.cfg.Observability.Capture.To == "store" {
		captureDays = g.cfg.Observability.Capture.RetentionDays
	}
	if days := g.cfg.Storage.UsageRetentionDays; days > 0 || captureDays > 0 {
		go newRetention(store, days, captureDays, g.reg, g.log.Named("retention")).run(g.quit)
	}
	return nil
}

// registerAuthStats exports the key cache's counters.
func registerAuthStats(reg prometheus.Registerer, auth *authz.Authenticator) {
	for _, c := range []struct {
		name, help string
		v          func(authz.AuthStats) uint64
	}{
		{"cache_hits_total", "API keys answered from the cache, accepted or refused.", func(s authz.AuthStats) uint64 { return s.CacheHits }},
		{"store_lookups_total", "API key lookups in the store (concurrent misses of one key share one).", func(s authz.AuthStats) uint64 { return s.Lookups }},
		{"store_errors_total", "API key lookups that failed or timed out; the requests got 503.", func(s authz.AuthStats) uint64 { return s.StoreErrors }},
		{"store_timeouts_total", "API key lookups that ran out of time.", func(s authz.AuthStats) uint64 { return s.StoreTimeouts }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "modelgate_auth_" + c.name, Help: c.help},
			func() float64 { return float64(c.v(auth.Stats())) }))
	}
}

// run serves until ctx ends, then stops gracefully.
func (g *gateway) run(ctx context.Context, grpcL, adminL net.Listener) error {
	g.start(grpcL, adminL)
	err := g.wait(ctx)
	g.stop()
	return err
}

// start serves on the listeners.
func (g *gateway) start(grpcL, adminL net.Listener) {
	go func() { g.errc <- g.grpc.Serve(&notifyListener{Listener: grpcL, closed: g.grpcClosed}) }()
	go func() {
		if err := g.admin.Serve(adminL); !errors.Is(err, http.ErrServerClosed) {
			g.errc <- err
			return
		}
		g.errc <- nil
	}()
}

// wait returns when ctx ends (nil) or a server fails.
func (g *gateway) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-g.errc:
		return err
	}
}

// handlerExitTimeout bounds the wait, after the hard stop, for the
// ext_proc handlers that were cut to return (their bookkeeping takes up to
// extproc's UsageTimeout, 5s).
const handlerExitTimeout = 10 * time.Second

// stop drains the gateway: it turns not ready at once (/readyz 503, gRPC
// health NOT_SERVING), refuses new connections, lets the open ext_proc
// streams run on for up to the grace period and cuts those left; then it
// makes the budget charges Redis failed to make (one last try), flushes
// the ledger and closes the admin listener. Later calls wait for
// the first.
func (g *gateway) stop() { g.stopOnce.Do(g.drain) }

func (g *gateway) drain() {
	g.ready.drain()
	close(g.quit)
	open, idle := g.streams.drain()
	graceful := make(chan struct{})
	go func() { g.grpc.GracefulStop(); close(graceful) }()
	select { // new connections are refused from here on
	case <-g.grpcClosed:
	case <-graceful:
	}
	g.log.Info("draining", zap.Int("open_streams", open), zap.Duration("grace", g.grace))
	timer := time.NewTimer(g.grace)
	select {
	case <-graceful:
	case <-idle: // what is left are health watches
	case <-timer.C:
	}
	timer.Stop()
	drained, cut := g.streams.end()
	stopped := make(chan struct{})
	go func() { g.grpc.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(handlerExitTimeout):
		g.log.Error("ext_proc handlers still running after the hard stop", zap.Duration("waited", handlerExitTimeout))
	}
	if cut > 0 {
		g.log.Warn("drained", zap.Int("drained", drained), zap.Int("cut", cut), zap.Duration("grace", g.grace))
	} else {
		g.log.Info("drained", zap.Int("drained", drained), zap.Int("cut", 0))
	}
	if g.stopBudgets != nil {
		g.stopBudgets()
	}
	if g.ledger != nil {
		g.flushLedger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminCloseTimeout)
	defer cancel()
	g.admin.Shutdown(ctx) //nolint:errcheck // shutting down anyway
	g.closeLimiter()      //nolint:errcheck // shutting down anyway
	if err := g.closeTracer(ctx); err != nil {
		g.log.Warn("flushing the last spans", zap.Error(err))
	}
}

// ledgerFlushTimeout bounds writing the queued usage records at shutdown,
// on top of the grace period for requests.
const ledgerFlushTimeout = 10 * time.Second

// adminCloseTimeout bounds closing the admin listener, last.
const adminCloseTimeout = 5 * time.Second

// flushLedger writes the usage records still queued, once every request
// has recorded its own (or the grace period is over), then the payload
// captures, in what is left of the same ledgerFlushTimeout: usage is what
// the bills come from.
func (g *gateway) flushLedger() {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerFlushTimeout)
	defer cancel()
	if err := g.ledger.Close(ctx); err != nil {
		g.log.Error("flushing the usage ledger", zap.Error(err))
	}
	if err := g.capture.close(ctx); err != nil {
		g.log.Error("flushing the payload captures", zap.Error(err))
	}
}

// Why the gateway is not ready, as /readyz says.
const (
	reasonStarting = "starting"
	reasonStore    = "store unavailable"
	reasonLimiter  = "rate limiter unavailable"
	reasonDraining = "draining"
)

// probeTimeout bounds one readiness check; readinessInterval is how often
// the gRPC health status is checked when no /readyz request checks it.
const (
	probeTimeout      = 2 * time.Second
	readinessInterval = 5 * time.Second
)

// probe is one dependency readiness pings.
type probe struct {
	reason string // why the gateway is not ready when ping fails
	ping   func(context.Context) error
}

// readiness is whether the gateway takes traffic: once the store is
// attached and its probes answer, until it drains. It keeps the gRPC
// health service's status ("") in step.
type readiness struct {
	health *health.Server
	log    *zap.Logger

	mu       sync.Mutex
	waiting  string  // the reason while no probes are attached
	probes   []probe // nil until attach
	draining bool
	last     string // the last reason, "" when ready, for logging changes
}

func newReadiness(h *health.Server, log *zap.Logger) *readiness {
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return &readiness{health: h, log: log, waiting: reasonStarting, last: reasonStarting}
}

// waitFor says why the gateway is not ready before attach.
func (r *readiness) waitFor(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = reason
}

func (r *readiness) attach(probes []probe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probes, r.waiting = probes, ""
}

// check pings the probes and returns why the gateway is not ready, ""
// when it is; it updates the gRPC health status.
func (r *readiness) check(ctx context.Context) string {
	r.mu.Lock()
	reason, probes := r.waiting, r.probes
	if r.draining {
		reason, probes = reasonDraining, nil
	}
	r.mu.Unlock()
	var err error
	for _, p := range probes {
		if err = p.ping(ctx); err != nil {
			reason = p.reason
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.draining { // began meanwhile
		return reasonDraining
	}
	if reason != r.last {
		if reason == "" {
			r.log.Info("ready")
		} else {
			r.log.Warn("not ready", zap.String("reason", reason), zap.Error(err))
		}
		r.last = reason
	}
	st := healthpb.HealthCheckResponse_SERVING
	if reason != "" {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	r.health.SetServingStatus("", st)
	return reason
}

// drain makes the gateway not ready for good.
func (r *readiness) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.draining, r.last = true, reasonDraining
	r.health.Shutdown() // NOT_SERVING, and later updates are ignored
}

// readyz answers 200 when the gateway is ready, else 503 and why.
func (g *gateway) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
	defer cancel()
	reason := g.ready.check(ctx)
	w.Header().Set("content-type", "application/json")
	w.Header().Set("cache-control", "no-store")
	if reason == "" {
		w.Write([]byte(`{"status":"ready"}` + "\n")) //nolint:errcheck // best effort
		return
	}
	b, _ := json.Marshal(map[string]string{"status": "not ready", "reason": reason})
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(append(b, '\n')) //nolint:errcheck // best effort
}

// watchReadiness keeps the gRPC health status current until stop.
func (g *gateway) watchReadiness() {
	t := time.NewTicker(readinessInterval)
	defer t.Stop()
	for {
		select {
		case <-g.quit:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			g.ready.check(ctx)
			cancel()
		}
	}
}

// processor is the ext_proc service: the extproc server once attach has
// set it, UNAVAILABLE before.
type processor struct {
	extprocv3.UnimplementedExternalProcessorServer
	srv atomic.Pointer[extproc.Server]
}

func (p *processor) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	if srv := p.srv.Load(); srv != nil {
		return srv.Process(stream)
	}
	return status.Error(codes.Unavailable, "modelgate is starting: its store is not available yet")
}

// streamCount counts the open ext_proc streams, and those that end while
// the gateway drains.
type streamCount struct {
	mu       sync.Mutex
	open     int
	draining bool
	drained  int
	idle     chan struct{} // closed when no stream is left while draining
}

// intercept counts ext_proc streams (not health watches).
func (c *streamCount) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if info.FullMethod != extprocv3.ExternalProcessor_Process_FullMethodName {
		return h(srv, ss)
	}
	c.mu.Lock()
	c.open++
	c.mu.Unlock()
	defer c.done()
	return h(srv, ss)
}

// count is the number of ext_proc streams open.
func (c *streamCount) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// registerStreamStats exports the open ext_proc streams and the most
// Envoy opens (its circuit breakers' max requests): one stream a request
// in flight, so their ratio is how close the gateway is to refusing.
func registerStreamStats(reg prometheus.Registerer, c *streamCount, limit int64) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgate_extproc_streams_open",
			Help: "ext_proc streams open: requests in flight."}, func() float64 { return float64(c.count()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgate_extproc_streams_limit",
			Help: "The most requests Envoy sends at once (envoy.max_requests_in_flight): beyond, it refuses with 503."},
			func() float64 { return float64(limit) }),
	)
}

func (c *streamCount) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open--
	if !c.draining {
		return
	}
	c.drained++
	if c.open == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// drain starts counting the streams that end; it returns how many are
// open and what is closed once none is.
func (c *streamCount) drain() (open int, idle <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	ch := make(chan struct{})
	if c.open == 0 {
		close(ch)
	} else {
		c.idle = ch
	}
	return c.open, ch
}

// end stops counting: it returns how many streams ended while draining
// and how many are still open, to be cut.
func (c *streamCount) end() (drained, cut int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining, c.idle = false, nil
	return c.drained, c.open
}

// notifyListener closes closed when it is closed.
type notifyListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *notifyListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

// The HTTP/2 windows the server gives Envoy, fixed: left to gRPC, they
// start at 64 KiB and grow by bandwidth estimation, whose pings go out
// with received data one round trip after another, each a frame for
// Envoy to answer and for the server to read. The connection's window
// bounds what a connection holds unread, at the most gRPC's estimation
// would grow it to.
const (
	streamWindow = 1 << 20
	connWindow   = 16 << 20
)
