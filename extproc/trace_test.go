package extproc_test

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"modelgate/extproc"
	"modelgate/extproc/extproctest"
)

// otlpReceiver is an in-process OTLP/gRPC trace collector.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// wait returns the spans once there are n.
func (r *otlpReceiver) wait(t *testing.T, n int) []*tracepb.Span {
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

func startReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return r, l.Addr().String()
}

func attrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	out := map[string]*commonpb.AnyValue{}
	for _, kv := range s.GetAttributes() {
		out[kv.GetKey()] = kv.GetValue()
	}
	return out
}

// Spans go over OTLP to a collector: one a request, a child of the
// traceparent Envoy forwards, named and attributed as the GenAI semantic
// conventions say, refusals included, and with no secret anywhere.
func TestTracesExportedOverOTLP(t *testing.T) {
	recv, addr := startReceiver(t)
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) { c.Tracer = tp.Tracer("modelgate") })

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	post := func(key, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
		f.gw.Do(t, req)
	}
	post(f.keys["valid"], chatBody)
	post(f.keys["valid"], `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}],"stream":true}`)
	post("sk-mg-not-a-real-key-at-all-000000", chatBody)
	spans := recv.wait(t, 3)
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for i, s := range spans {
		if hex.EncodeToString(s.GetTraceId()) != traceID || hex.EncodeToString(s.GetParentSpanId()) != parentID {
			t.Errorf("span %d: trace %x parent %x, want the traceparent's", i, s.GetTraceId(), s.GetParentSpanId())
		}
		if s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("span %d: kind %v", i, s.GetKind())
		}
		for k, v := range attrs(s) {
			if sv := v.GetStringValue(); strings.Contains(sv, f.keys["valid"]) || strings.Contains(sv, providerKey) || strings.Contains(sv, "sk-mg-not-a-real") {
				t.Errorf("span %d: attribute %s holds a secret", i, k)
			}
		}
	}
	json, stream, refused := spans[0], spans[1], spans[2]
	a := attrs(json)
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-5-nano", "modelgate.account.id": f.account.ID} {
		if got := a[k].GetStringValue(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if json.GetName() != "chat gpt-4o" || a["gen_ai.usage.input_tokens"].GetIntValue() != 8 || a["gen_ai.usage.output_tokens"].GetIntValue() != 377 ||
		a["http.response.status_code"].GetIntValue() != 200 || a["modelgate.key.id"].GetStringValue() == "" {
		t.Errorf("the JSON request's span: %s %v", json.GetName(), a)
	}
	if fr := a["gen_ai.response.finish_reasons"].GetArrayValue().GetValues(); len(fr) != 1 || fr[0].GetStringValue() != "stop" {
		t.Errorf("finish reasons = %v", fr)
	}
	sa := attrs(stream)
	if sa["gen_ai.server.time_to_first_token"].GetDoubleValue() <= 0 || len(stream.GetEvents()) != 1 || stream.GetEvents()[0].GetName() != "gen_ai.first_token" {
		t.Errorf("the stream's span: %v, events %v", sa, stream.GetEvents())
	}
	ra := attrs(refused)
	if ra["error.type"].GetStringValue() != "authentication_error" || ra["http.response.status_code"].GetIntValue() != 401 ||
		refused.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || ra["modelgate.account.id"] != nil {
		t.Errorf("the refused request's span: %v, status %v", ra, refused.GetStatus())
	}
}
