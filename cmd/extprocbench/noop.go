package main

import (
	"net"
	"net/http"
	"net/http/pprof"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"modelgate/extproc/extproctest"
)

// serveNoop serves the no-op server on addr (with the gRPC health service,
// as the gateway has) and Go's profiles on pprofAddr until the process is
// killed.
func serveNoop(addr, pprofAddr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if pprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		go http.ListenAndServe(pprofAddr, mux) //nolint:errcheck // profiles are optional
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, extproctest.Noop{})
	healthpb.RegisterHealthServer(gs, health.NewServer())
	return gs.Serve(l)
}
