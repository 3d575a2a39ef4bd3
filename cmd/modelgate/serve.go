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
	"modelgate/authz/sqlite"
	"modelgate/cmd/modelgate/config"
	"modelgate/extproc"
)

func runServe(ctx context.Context, args []string, e env) error {
	cfg, _, err := configOnly("serve", args, e)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr)
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush
	store, err := sqlite.Open(ctx, cfg.Storage.SQLitePath)
	if err != nil {
		return fmt.Errorf("opening %s: %w", cfg.Storage.SQLitePath, err)
	}
	defer store.Close()
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
	srv, err := extproc.New(ecfg, auth, store)
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
	admin := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return &gateway{grpc: gs, admin: admin, auth: auth, log: log, closeLimiter: closeLimiter}, nil
}

// run serves until ctx ends, then stops gracefully.
func (g *gateway) run(ctx context.Context, grpcL, adminL net.Listener) error {
	errc := make(chan error, 2)
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
	g.closeLimiter() //nolint:errcheck // shutting down anyway
}
