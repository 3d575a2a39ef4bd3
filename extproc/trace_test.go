package extproc_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"modelgate/extproc"
	"modelgate/extproc/extproctest"
)

// Spans go over OTLP to a collector: one a request, a child of the
// traceparent Envoy forwards, named and attributed as the GenAI semantic
// conventions say, refusals included, and with no secret anywhere.
func TestTracesExportedOverOTLP(t *testing.T) {
	recv := extproctest.StartOTLPReceiver(t)
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(recv.Addr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) { c.Tracer = tp.Tracer("modelgate") })

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	post := func(key, body, id string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
		req.Header.Set("x-request-id", id)
		f.gw.Do(t, req)
	}
	post(f.keys["valid"], chatBody, "json")
	post(f.keys["valid"], `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}],"stream":true}`, "stream")
	post("sk-mg-not-a-real-key-at-all-000000", chatBody, "refused")
	spans := recv.Wait(t, 3)
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	// Spans are exported as they end, which need not be the order the
	// requests were sent in: a stream's ends when Envoy closes its ext_proc
	// stream, which may come after the next request's.
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[extproctest.Attributes(s)["modelgate.client_request_id"].GetStringValue()] = s
	}
	for i, s := range spans {
		if hex.EncodeToString(s.GetTraceId()) != traceID || hex.EncodeToString(s.GetParentSpanId()) != parentID {
			t.Errorf("span %d: trace %x parent %x, want the traceparent's", i, s.GetTraceId(), s.GetParentSpanId())
		}
		if s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("span %d: kind %v", i, s.GetKind())
		}
		for k, v := range extproctest.Attributes(s) {
			if sv := v.GetStringValue(); strings.Contains(sv, f.keys["valid"]) || strings.Contains(sv, providerKey) || strings.Contains(sv, "sk-mg-not-a-real") {
				t.Errorf("span %d: attribute %s holds a secret", i, k)
			}
		}
	}
	json, stream, refused := byID["json"], byID["stream"], byID["refused"]
	if json == nil || stream == nil || refused == nil {
		t.Fatalf("spans by the client's request id: %v", byID)
	}
	a := extproctest.Attributes(json)
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-5-nano", "modelgate.account.id": f.account.ID} {
		if got := a[k].GetStringValue(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if _, ok := a["modelgate.requested_model"]; ok {
		t.Errorf("a request by the model's id names a requested model: %v", a["modelgate.requested_model"])
	}
	if json.GetName() != "chat gpt-4o" || a["gen_ai.usage.input_tokens"].GetIntValue() != 8 || a["gen_ai.usage.output_tokens"].GetIntValue() != 377 ||
		a["http.response.status_code"].GetIntValue() != 200 || a["modelgate.key.id"].GetStringValue() == "" {
		t.Errorf("the JSON request's span: %s %v", json.GetName(), a)
	}
	if fr := a["gen_ai.response.finish_reasons"].GetArrayValue().GetValues(); len(fr) != 1 || fr[0].GetStringValue() != "stop" {
		t.Errorf("finish reasons = %v", fr)
	}
	sa := extproctest.Attributes(stream)
	if sa["gen_ai.server.time_to_first_token"].GetDoubleValue() <= 0 || len(stream.GetEvents()) != 1 || stream.GetEvents()[0].GetName() != "gen_ai.first_token" {
		t.Errorf("the stream's span: %v, events %v", sa, stream.GetEvents())
	}
	ra := extproctest.Attributes(refused)
	if ra["error.type"].GetStringValue() != "authentication_error" || ra["http.response.status_code"].GetIntValue() != 401 ||
		refused.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || ra["modelgate.account.id"] != nil {
		t.Errorf("the refused request's span: %v, status %v", ra, refused.GetStatus())
	}
}
