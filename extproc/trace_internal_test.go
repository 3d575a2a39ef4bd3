package extproc

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"
)

// Envoy's trace context in the stream's gRPC metadata (its span of the
// ext_proc call) is the parent before the request's own traceparent.
func TestSpanParentPrefersTheStreamMetadata(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := &Server{cfg: Config{Tracer: tp.Tracer("t")}, now: time.Now}
	hm := readHeaders(&corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: "traceparent", RawValue: []byte("00-11111111111111111111111111111111-2222222222222222-01")}}})
	for _, tc := range []struct {
		md           metadata.MD
		trace, paren string
	}{
		{nil, "11111111111111111111111111111111", "2222222222222222"},
		{metadata.Pairs("traceparent", "00-33333333333333333333333333333333-4444444444444444-01"), "33333333333333333333333333333333", "4444444444444444"},
	} {
		ctx := context.Background()
		if tc.md != nil {
			ctx = metadata.NewIncomingContext(ctx, tc.md)
		}
		ex := &exchange{stream: stream{s: s, start: time.Now()}}
		ex.span.start(s.cfg.Tracer, ctx, hm, ex.start)
		ex.span.end(&outcome{end: time.Now()})
		spans := rec.Ended()
		got := spans[len(spans)-1]
		if got.SpanContext().TraceID().String() != tc.trace || got.Parent().SpanID().String() != tc.paren {
			t.Errorf("metadata %v: trace %s parent %s, want %s %s", tc.md, got.SpanContext().TraceID(), got.Parent().SpanID(), tc.trace, tc.paren)
		}
	}
}
