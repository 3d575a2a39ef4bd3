package envoytest_test

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"modelgate/envoy"
	"modelgate/envoy/standin"
)

// fakeEnvoyVar makes this test binary a fake Envoy: "serve" loads the
// bootstrap like Envoy (-c, strictly), serves it with the stand-in, which
// writes its access log to stdout as Envoy does, and answers the admin
// endpoints Start uses (/ready, /listeners?format=json) on the admin
// address, which it writes to --admin-address-path; "fail" writes an
// error to stderr and exits 1. It lets the tests run Start's real-Envoy
// path, down to the process, its pipes and its signals, where no Envoy
// binary exists.
const fakeEnvoyVar = "MODELGATE_ENVOYTEST_FAKE_ENVOY"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnvoyVar); mode != "" {
		os.Exit(fakeEnvoy(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeEnvoyBinary writes a script that runs this test binary as a fake
// Envoy in mode, and returns its path.
func fakeEnvoyBinary(t *testing.T, mode string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake Envoy is a shell script")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "envoy")
	script := fmt.Sprintf("#!/bin/sh\n%s=%s exec %s \"$@\"\n", fakeEnvoyVar, mode, strconv.Quote(self))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func fakeEnvoy(mode string, args []string) int {
	fs := flag.NewFlagSet("envoy", flag.ContinueOnError)
	cfgPath := fs.String("c", "", "config path")
	adminPath := fs.String("admin-address-path", "", "admin address path")
	logLevel := fs.String("log-level", "info", "log level")
	fs.Uint("base-id", 0, "base id")
	concurrency := fs.Uint("concurrency", 0, "worker threads")
	fs.Bool("disable-hot-restart", false, "no hot restart")
	flush := fs.Uint("file-flush-interval-msec", 10000, "access log flush interval")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fake envoy: bad command line %q (%v)\n", args, err)
		return 1
	}
	if *cfgPath == "" || *adminPath == "" || *logLevel != "warn" || *concurrency != 1 || *flush == 0 || *flush > 1000 {
		fmt.Fprintf(os.Stderr, "fake envoy: unexpected command line %q\n", args)
		return 1
	}
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "[critical] fake envoy: refusing to start")
		return 1
	}
	data, err := os.ReadFile(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake envoy:", err)
		return 1
	}
	b, err := envoy.LoadYAML(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake envoy: loading the bootstrap:", err)
		return 1
	}
	proxy, err := standin.New(b)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake envoy:", err)
		return 1
	}
	defer proxy.Close()
	listen := func(a *corev3.Address) (net.Listener, error) {
		sa := a.GetSocketAddress()
		return net.Listen("tcp", net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
	}
	lc := b.GetStaticResources().GetListeners()[0]
	l, err := listen(lc.GetAddress())
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake envoy:", err)
		return 1
	}
	al, err := listen(b.GetAdmin().GetAddress())
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake envoy:", err)
		return 1
	}
	bound := l.Addr().(*net.TCPAddr)
	statuses, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(&adminv3.Listeners{ListenerStatuses: []*adminv3.ListenerStatus{{
		Name: lc.GetName(),
		LocalAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: bound.IP.String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(bound.Port)}}}},
	}}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "LIVE") })
	mux.HandleFunc("GET /listeners", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") != "json" {
			fmt.Fprintf(w, "%s::%s\n", lc.GetName(), bound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(statuses) //nolint:errcheck // a test server
	})
	go http.Serve(l, proxy) //nolint:errcheck // ends with the process
	go http.Serve(al, mux)  //nolint:errcheck // ends with the process
	if err := os.WriteFile(*adminPath, []byte(al.Addr().String()), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "fake envoy:", err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	return 0
}
