package extproc

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// Tracing: with Config.Tracer set, every exchange gets a span, named and
// attributed as the OpenTelemetry GenAI semantic conventions say. Its
// parent is the W3C trace context of the ext_proc stream's gRPC metadata,
// which Envoy sends when its own tracing is on (its span of the ext_proc
// call), else the request's traceparent header (the client's trace).
// Attributes name the account and key by id, never a secret. Without a
// Tracer nothing here runs.

var traceContext propagation.TraceContext

// headerCarrier reads a request's headers for the propagator.
type headerCarrier struct{ h headerMap }

func (c headerCarrier) Get(key string) string { return c.h.get(key) }
func (headerCarrier) Set(string, string)      {}
func (headerCarrier) Keys() []string          { return []string{"traceparent", "tracestate"} }

// metadataCarrier reads a gRPC stream's metadata for the propagator.
type metadataCarrier struct{ md metadata.MD }

func (c metadataCarrier) Get(key string) string {
	if v := c.md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (metadataCarrier) Set(string, string) {}
func (metadataCarrier) Keys() []string     { return []string{"traceparent", "tracestate"} }

// exchangeSpan is an exchange's trace span, nil without tracing, and
// the finish reasons its answer named.
type exchangeSpan struct {
	span          trace.Span
	finishReasons []string
}

// start starts the exchange's span with t (none without a tracer), at
// start, the child of the stream's trace context or else of its request
// headers'.
func (sp *exchangeSpan) start(t trace.Tracer, stream context.Context, hm headerMap, start time.Time) {
	if t == nil {
		return
	}
	var carrier propagation.TextMapCarrier = headerCarrier{hm}
	if md, ok := metadata.FromIncomingContext(stream); ok && len(md.Get("traceparent")) > 0 {
		carrier = metadataCarrier{md}
	}
	ctx := traceContext.Extract(context.Background(), carrier)
	_, sp.span = t.Start(ctx, "modelgate", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
}

// noteFinishReasons keeps the finish reasons the translator reported, for
// the span, each once.
func (sp *exchangeSpan) noteFinishReasons(reasons []string) {
	for _, r := range reasons {
		if !slices.Contains(sp.finishReasons, r) {
			sp.finishReasons = append(sp.finishReasons, r)
		}
	}
}

// end names the span and gives it the outcome's attributes, then ends
// it when the exchange ended.
func (sp *exchangeSpan) end(o *outcome) {
	span := sp.span
	if span == nil {
		return
	}
	sp.span = nil
	op := genAIOperation(o.endpoint)
	name := op
	if o.model != "" {
		name += " " + o.model
	}
	span.SetName(name)
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, attribute.String("gen_ai.operation.name", op),
		attribute.Int("http.response.status_code", o.status))
	if o.requestID != "" {
		attrs = append(attrs, attribute.String("modelgate.request_id", o.requestID))
	}
	if o.clientRequestID != "" {
		attrs = append(attrs, attribute.String("modelgate.client_request_id", o.clientRequestID))
	}
	if o.model != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.model", o.model))
	}
	if o.requested != "" && o.requested != o.model { // an alias, an auto model
		attrs = append(attrs, attribute.String("modelgate.requested_model", o.requested))
	}
	if o.provider != "" {
		attrs = append(attrs, attribute.String("gen_ai.provider.name", o.genAIProvider),
			attribute.String("gen_ai.response.model", o.upstreamModel),
			attribute.String("modelgate.backend", o.backend))
	}
	if p := o.principal; p != nil {
		attrs = append(attrs, attribute.String("modelgate.account.id", p.AccountID), attribute.String("modelgate.key.id", p.KeyID))
	}
	if o.routed {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", o.usage.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", o.usage.CompletionTokens))
	}
	if len(o.finishReasons) > 0 {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", o.finishReasons))
	}
	if !o.firstByte.IsZero() {
		ttft := o.firstByte.Sub(o.start)
		attrs = append(attrs, attribute.Float64("gen_ai.server.time_to_first_token", ttft.Seconds()))
		span.AddEvent("gen_ai.first_token", trace.WithTimestamp(o.firstByte))
	}
	for _, g := range o.guards { // never what a rule matched
		span.AddEvent("modelgate.guardrail", trace.WithAttributes(attribute.String("modelgate.guardrail.rule", g.Rule),
			attribute.String("modelgate.guardrail.phase", g.Phase.String()), attribute.String("modelgate.guardrail.check", g.Check),
			attribute.String("modelgate.guardrail.result", string(g.Result))))
	}
	if o.status >= 400 || o.status == 0 {
		errType := o.errType
		if errType == "" {
			errType = "provider_error"
			if o.status == 0 {
				errType = "no_answer"
			}
		}
		attrs = append(attrs, attribute.String("error.type", errType))
		span.SetStatus(codes.Error, http.StatusText(o.status)+" "+strconv.Itoa(o.status))
	}
	span.SetAttributes(attrs...)
	span.End(trace.WithTimestamp(o.end))
}
