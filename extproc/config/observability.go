package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Observability is what the gateway tells of its requests besides the
// usage ledger: the request log, the GenAI metrics' labels and traces.
type Observability struct {
	RequestLog RequestLog `json:"request_log"`
	Metrics    Metrics    `json:"metrics"`
	Tracing    Tracing    `json:"tracing"`
	Capture    Capture    `json:"capture"`
}

// Capture keeps requests' and answers' bodies, redacted: opt-in.
type Capture struct {
	// To is where captures go: "store" (the database, shown on the
	// dashboard's request pages) or "file" (JSON lines); empty: none.
	To string `json:"to"`
	// File is the JSON-lines file of To: file, opened for appending.
	File string `json:"file"`
	// MaxBytes is the most of each body kept; default 65536.
	MaxBytes int `json:"max_bytes"`
	// RetentionDays is how long captures in the store are kept; default
	// 7. (A file is left to log rotation.)
	RetentionDays int `json:"retention_days"`
	// Redact are the redaction rules; strings that look like API keys are
	// always hidden.
	Redact Redact `json:"redact"`
}

// Redact are a capture's redaction rules.
type Redact struct {
	// Members are JSON member names whose values are replaced whole, at
	// any depth.
	Members []string `json:"members"`
	// Patterns are regular expressions (Go's syntax) replaced wherever
	// they match in the bodies' strings.
	Patterns []string `json:"patterns"`
}

// RequestLog is the "request done" line every exchange ends with.
type RequestLog struct {
	// Sample is the share of successful requests logged, above 0 and at
	// most 1 (the default); refusals and errors are always logged.
	Sample *float64 `json:"sample"`
}

// Metrics are the options of the metrics on /metrics.
type Metrics struct {
	// AccountLabels labels the GenAI metrics by account id too: a series
	// per account and model, for a bounded number of accounts.
	AccountLabels bool `json:"account_labels"`
}

// Tracing exports a span per request over OTLP/gRPC.
type Tracing struct {
	// OTLPEndpoint is the collector's URL: http://host:port (plaintext) or
	// https://host:port. Empty: the standard OTEL_EXPORTER_OTLP_ENDPOINT
	// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables, and without them
	// no tracing.
	OTLPEndpoint string `json:"otlp_endpoint"`
	// Sample is the share of the traces the gateway starts that are
	// sampled, above 0 and at most 1 (the default); a trace Envoy or the
	// client started keeps its own decision.
	Sample *float64 `json:"sample"`
	// ServiceName is the service.name of the spans; default modelgate.
	ServiceName string `json:"service_name"`
	// Envoy turns Envoy's own OpenTelemetry tracing on, to the same
	// collector (which must be plaintext, as Envoy's cluster is): the
	// gateway's spans are then children of Envoy's. It needs
	// otlp_endpoint.
	Envoy bool `json:"envoy"`
}

// RequestLogSample is the request log's sampling share.
func (c *Config) RequestLogSample() float64 {
	if s := c.Observability.RequestLog.Sample; s != nil {
		return *s
	}
	return 1
}

// TracingSample is the tracing sampling share.
func (c *Config) TracingSample() float64 {
	if s := c.Observability.Tracing.Sample; s != nil {
		return *s
	}
	return 1
}

// CollectorAddress is host:port of the tracing endpoint's URL.
func (t Tracing) CollectorAddress() string {
	u, err := url.Parse(t.OTLPEndpoint)
	if err != nil {
		return ""
	}
	return u.Host
}

func (c *Config) validateObservability(p *problems) {
	o := c.Observability
	switch cp := o.Capture; cp.To {
	case "", "store":
	case "file":
		if cp.File == "" {
			p.add("observability.capture.file", "is required with to: file")
		}
	default:
		p.add("observability.capture.to", "%q: want store or file", cp.To)
	}
	if o.Capture.MaxBytes < 0 || o.Capture.MaxBytes > 16<<20 {
		p.add("observability.capture.max_bytes", "must be between 0 (the default, 65536) and 16 MiB")
	}
	if o.Capture.RetentionDays < 0 {
		p.add("observability.capture.retention_days", "must not be negative")
	}
	for i, pat := range o.Capture.Redact.Patterns {
		if _, err := regexp.Compile(pat); err != nil {
			p.add(fmt.Sprintf("observability.capture.redact.patterns[%d]", i), "%v", err)
		}
	}
	for path, s := range map[string]*float64{"observability.request_log.sample": o.RequestLog.Sample, "observability.tracing.sample": o.Tracing.Sample} {
		if s != nil && (*s <= 0 || *s > 1) {
			p.add(path, "must be above 0 and at most 1")
		}
	}
	if e := o.Tracing.OTLPEndpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			p.add("observability.tracing.otlp_endpoint", "%q: want http://host:port or https://host:port", e)
		} else if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
			p.add("observability.tracing.otlp_endpoint", "%q: name the port (OTLP/gRPC listens on 4317)", e)
		}
	}
	if o.Tracing.Envoy {
		u, err := url.Parse(o.Tracing.OTLPEndpoint)
		if o.Tracing.OTLPEndpoint == "" || err != nil || u.Scheme != "http" {
			p.add("observability.tracing.envoy", "needs a plaintext otlp_endpoint (http://host:port) for Envoy's collector cluster")
		}
	}
}
