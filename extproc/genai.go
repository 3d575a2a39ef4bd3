package extproc

import (
	"cmp"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The OpenTelemetry GenAI semantic conventions' metrics, as the
// OpenTelemetry Prometheus exporter names them, with their recommended
// buckets. Labels are the conventions' attributes with dots as
// underscores, all bounded: the operation, the provider, the configured
// model, the error type, and the account only when Config.MetricsAccounts
// says so.
var (
	genAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	genAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	genAITTFTBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	genAITPOTBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
)

// genAIMetrics are the GenAI histograms.
type genAIMetrics struct {
	tokens, duration, ttft, tpot *prometheus.HistogramVec
	series                       syncMap[genAILabels, *genAISeries]
}

type genAILabels struct{ operation, provider, model, errType, account string }

type genAISeries struct {
	input, output, duration, ttft, tpot prometheus.Observer
}

func newGenAIMetrics(accounts bool) *genAIMetrics {
	labels := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}
	if accounts {
		labels = append(labels, "modelgate_account_id")
	}
	with := func(extra ...string) []string { return append(append([]string{}, labels...), extra...) }
	return &genAIMetrics{
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_token_usage", Help: "Tokens used per request, by type input or output (gen_ai.client.token.usage).",
			Buckets: genAITokenBuckets,
		}, with("gen_ai_token_type")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_operation_duration_seconds", Help: "Time from the request to the end of the answer of a request a provider served or failed (gen_ai.client.operation.duration); error_type is empty on success.",
			Buckets: genAIDurationBuckets,
		}, with("error_type")),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_to_first_token_seconds", Help: "Time from the request to the first streamed bytes (gen_ai.server.time_to_first_token).",
			Buckets: genAITTFTBuckets,
		}, labels),
		tpot: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_per_output_token_seconds", Help: "Time per output token after the first, of streams (gen_ai.server.time_per_output_token).",
			Buckets: genAITPOTBuckets,
		}, labels),
	}
}

func (g *genAIMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.tokens, g.duration, g.ttft, g.tpot}
}

func (g *genAIMetrics) seriesOf(l genAILabels, accounts bool) *genAISeries {
	if s, ok := g.series.Load(l); ok {
		return s
	}
	vals := []string{l.operation, l.provider, l.model}
	if accounts {
		vals = append(vals, l.account)
	}
	with := func(extra string) []string { return append(append([]string{}, vals...), extra) }
	s, _ := g.series.LoadOrStore(l, &genAISeries{
		input:    g.tokens.WithLabelValues(with("input")...),
		output:   g.tokens.WithLabelValues(with("output")...),
		duration: g.duration.WithLabelValues(with(l.errType)...),
		ttft:     g.ttft.WithLabelValues(vals...),
		tpot:     g.tpot.WithLabelValues(vals...),
	})
	return s
}

// observe records a routed exchange: its duration always, and its tokens,
// time to first token and time per output token when it has them.
func (g *genAIMetrics) observe(o *outcome, accounts bool) {
	l := genAILabels{operation: genAIOperation(o.endpoint), provider: o.genAIProvider, model: o.model}
	if o.status >= 400 {
		l.errType = o.errType
		if l.errType == "" {
			l.errType = "provider_error"
		}
	}
	if accounts && o.principal != nil {
		l.account = o.principal.AccountID
	}
	s := g.seriesOf(l, accounts)
	s.duration.Observe(o.end.Sub(o.start).Seconds())
	if u := o.usage; u.TotalTokens > 0 {
		s.input.Observe(float64(u.PromptTokens))
		s.output.Observe(float64(u.CompletionTokens))
	}
	if o.firstByte.IsZero() {
		return
	}
	s.ttft.Observe(o.firstByte.Sub(o.start).Seconds())
	if n := o.usage.CompletionTokens; n > 1 {
		s.tpot.Observe(o.end.Sub(o.firstByte).Seconds() / float64(n-1))
	}
}

// genAIOperation is gen_ai.operation.name: the conventions' value where
// they have one, else the endpoint's name.
func genAIOperation(e endpoint) string { return cmp.Or(e.spec().operation, e.String()) }

// syncMap is a sync.Map of one key and value type.
type syncMap[K comparable, V any] struct{ m sync.Map }

func (s *syncMap[K, V]) Load(k K) (V, bool) {
	v, ok := s.m.Load(k)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (s *syncMap[K, V]) LoadOrStore(k K, v V) (V, bool) {
	a, loaded := s.m.LoadOrStore(k, v)
	return a.(V), loaded
}
