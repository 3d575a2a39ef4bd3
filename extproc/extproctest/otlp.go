package extproctest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// OTLPReceiver is an in-process OTLP/gRPC trace collector for tests.
type OTLPReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	// Addr is its host:port; it speaks plaintext HTTP/2.
	Addr string

	mu    sync.Mutex
	spans []*tracepb.Span
}

// StartOTLPReceiver starts a receiver on a free loopback port, stopped at
// the test's cleanup.
func StartOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &OTLPReceiver{Addr: l.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return r
}

// Export implements the OTLP trace service.
func (r *OTLPReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Wait returns the spans received once there are at least n, failing the
// test if they do not come within 10s.
func (r *OTLPReceiver) Wait(t testing.TB, n int) []*tracepb.Span {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		r.mu.Lock()
		spans := append([]*tracepb.Span(nil), r.spans...)
		r.mu.Unlock()
		if len(spans) >= n {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans arrived, want %d", len(spans), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Attributes are a span's attributes by key.
func Attributes(s *tracepb.Span) map[string]*commonpb.AnyValue {
	out := map[string]*commonpb.AnyValue{}
	for _, kv := range s.GetAttributes() {
		out[kv.GetKey()] = kv.GetValue()
	}
	return out
}
