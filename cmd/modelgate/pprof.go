package main

import (
	"net/http"
	"net/http/pprof"
)

// pprofEnv, set to 1, serves Go's profiles under /debug/pprof/ on the
// admin listener: for measuring the gateway (cmd/extprocbench fetches
// them), not for production, since a profile costs CPU while it runs.
const pprofEnv = "MODELGATE_PPROF"

func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
