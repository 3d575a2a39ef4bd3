package main

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"modelgate/extproc/config"
)

// newTracer returns the tracer of the config's tracing, and what flushes
// and stops it; a nil tracer when tracing is off. Tracing is on with
// observability.tracing.otlp_endpoint, or with the standard
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// variables (the exporter then reads the other OTEL_EXPORTER_OTLP_*
// variables, such as headers, itself); OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn it off. The exporter connects lazily: a
// collector that is down costs dropped spans, never requests.
func newTracer(ctx context.Context, cfg *config.Config, getenv func(string) string) (trace.Tracer, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	t := cfg.Observability.Tracing
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return nil, off, nil
	}
	var opts []otlptracegrpc.Option
	switch {
	case t.OTLPEndpoint != "":
		opts = append(opts, otlptracegrpc.WithEndpointURL(t.OTLPEndpoint))
	case getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "":
		return nil, off, nil
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", t.ServiceName),
			attribute.String("service.version", version()))),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TracingSample()))),
	)
	return tp.Tracer("modelgate"), tp.Shutdown, nil
}
