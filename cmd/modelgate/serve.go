package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/cmd/modelgate/config"
	"modelgate/extproc"
)

func runServe(ctx context.Context, args []string, e env) error {
	c := newCommand("serve", e, cmdHelp{
		synopsis: "modelgate serve --config F [--grpc-listen ADDR] [--admin-listen ADDR] [--sqlite-path PATH]",
		about: `Runs the production gateway: the ext_proc gRPC server Envoy calls (see
'modelgate envoy-config') and the admin endpoint with /metrics, /healthz and,
when the admin token's variable is set, the admin API and dashboard under
/admin/. It stops gracefully on SIGINT or SIGTERM. The flags override the
config's values; --grpc-listen does not change envoy.ext_proc_address, where
Envoy looks for this server.`,
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
	store, err := openStore(ctx, cfg, cfg.Storage.SQLitePath, e.getenv)
	if err != nil {
		return err
	}
	defer store.Close() // after run has flushed the ledger
	g, err := newGateway(cfg, store, e.getenv, log)
	if err != nil {
		return err
	}
	grpcL, err := net.Listen("tcp", cfg.Server.GRPCListen)
	if err != nil {
		return err
	}
	adminL, err := net.Listen("tcp", cfg.Server.AdminListen)
	if err != nil {
		grpcL.Close()
		return err
	}
	log.Info("serving", zap.String("grpc", grpcL.Addr().String()), zap.String("admin", adminL.Addr().String()))
	return g.run(ctx, grpcL, adminL)
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

// gateway is the ext_proc gRPC server and the admin HTTP server.
type gateway struct {
	grpc  *grpc.Server
	admin *http.Server
	auth  *authz.Authenticator
	log   *zap.Logger
	// ledger queues usage records off the request path; stop flushes it.
	ledger *ledger.Ledger

	closeLimiter func() error
}

func newGateway(cfg *config.Config, store authz.Store, getenv func(string) string, log *zap.Logger) (*gateway, error) {
	ecfg, err := extprocConfig(cfg, getenv, log.Named("extproc"))
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if ecfg.Metrics, err = extproc.NewMetrics(reg); err != nil {
		return nil, err
	}
	if rs, ok := store.(extproc.ResponseStore); ok { // stores that keep response state
		ecfg.Responses = rs
	}
	if is, ok := store.(extproc.ImageStore); ok {
		ecfg.Images = is
	}
	lim, closeLimiter, err := newLimiter(cfg, getenv)
	if err != nil {
		return nil, err
	}
	ecfg.Limiter = lim
	auth := authz.NewAuthenticator(store, authz.AuthenticatorConfig{})
	registerAuthStats(reg, auth)
	ledger, err := ledger.New(store, reg, ledger.Config{Logger: log.Named("ledger")})
	if err != nil {
		return nil, err
	}
	srv, err := extproc.New(ecfg, auth, ledger)
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(grpcMaxMessage(cfg)), grpc.MaxSendMsgSize(grpcMaxMessage(cfg)))
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n")) //nolint:errcheck // best effort
	})
	if err := mountAdmin(mux, cfg, store, auth, getenv, log); err != nil {
		return nil, err
	}
	admin := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return &gateway{grpc: gs, admin: admin, auth: auth, log: log, ledger: ledger, closeLimiter: closeLimiter}, nil
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
	errc := make(chan error, 2)
	// Not ctx: the ledger outlives it, taking the records of the requests
	// stop waits for, until stop closes it.
	go g.ledger.Run(context.WithoutCancel(ctx)) //nolint:errcheck // fails only if stop closed it first
	go func() { errc <- g.grpc.Serve(grpcL) }()
	go func() {
		if err := g.admin.Serve(adminL); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	g.stop()
	return err
}

func (g *gateway) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.admin.Shutdown(ctx) //nolint:errcheck // shutting down anyway
	done := make(chan struct{})
	go func() { g.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.grpc.Stop()
	}
	g.flushLedger()
	g.closeLimiter() //nolint:errcheck // shutting down anyway
}

// ledgerFlushTimeout bounds writing the queued usage records at shutdown,
// on top of the grace period for requests.
const ledgerFlushTimeout = 10 * time.Second

// flushLedger writes the usage records still queued, once every request
// has recorded its own (or the grace period is over).
func (g *gateway) flushLedger() {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerFlushTimeout)
	defer cancel()
	if err := g.ledger.Close(ctx); err != nil {
		g.log.Error("flushing the usage ledger", zap.Error(err))
	}
}
