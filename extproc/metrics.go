package extproc

import (
	"modelgate/extproc/guard"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the server's Prometheus metrics. Names follow
// modelgate_<subsystem>_<name>_<unit>; durations and token counts follow the
// OpenTelemetry GenAI semantic conventions (request duration, time to first
// token, token usage by type). Labels are bounded: endpoint, provider, the
// configured public model id and status code, never key or account ids.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ttft     *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	limiter  prometheus.Counter
	panics   prometheus.Counter
	// budgetRefusals and budgetAlerts count requests refused by a spent
	// budget and budgets reaching an alert, by subject type (key,
	// account, group) and percent.
	budgetRefusals *prometheus.CounterVec
	budgetAlerts   *prometheus.CounterVec
	// attempts and retries count a Fallback model's upstream attempts by
	// model and backend: every attempt, and those after the first
	// (Envoy's retries, on the same deployment or a fallback).
	attempts *prometheus.CounterVec
	retries  *prometheus.CounterVec
	// guards counts what guardrail rules did, by phase, check and
	// result (never by rule: names are the operator's free text).
	guards *prometheus.CounterVec
	// guardCalls times guard services' calls, by type, phase and result
	// (ok, error); guardHold the time a stream's first text was held.
	guardCalls *prometheus.HistogramVec
	guardHold  prometheus.Histogram
	// routes counts requests by the configured name the client's
	// matched (a model id, an alias, a prefix alias with its *, an auto
	// model) and the model that served them: the names agents send.
	routes *prometheus.CounterVec
	// genAI are the GenAI semantic conventions' histograms; accounts
	// labels them by account too.
	genAI    *genAIMetrics
	accounts bool

	// exchanges and usage hold the children observe writes, looked up
	// once per label set: each WithLabelValues hashes its labels and
	// takes a lock.
	exchanges sync.Map // exchangeLabels → *exchangeSeries
	usage     sync.Map // usageLabels → *usageSeries
	named     sync.Map // routeLabels → prometheus.Counter
}

type routeLabels struct{ name, model string }

type exchangeLabels struct {
	endpoint, provider string
	status             int
}

type exchangeSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

type usageLabels struct{ endpoint, provider, model string }

type usageSeries struct{ input, output prometheus.Counter }

// MetricsConfig holds the optional knobs of Metrics.
type MetricsConfig struct {
	// AccountLabels labels the GenAI metrics by account id too: a series
	// per account and model, so only for a bounded number of accounts.
	AccountLabels bool
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	return NewMetricsWith(reg, MetricsConfig{})
}

// NewMetricsWith registers the metrics on reg, as cfg says.
func NewMetricsWith(reg prometheus.Registerer, cfg MetricsConfig) (*Metrics, error) {
	m := &Metrics{genAI: newGenAIMetrics(cfg.AccountLabels), accounts: cfg.AccountLabels,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_requests_total",
			Help: "Requests handled, by endpoint, provider and client-facing status code.",
		}, []string{"endpoint", "provider", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelgate_extproc_request_duration_seconds",
			Help:    "Time from the request headers to the end of the response (gen_ai.server.request.duration).",
			Buckets: []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92},
		}, []string{"endpoint", "provider"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelgate_extproc_time_to_first_token_seconds",
			Help:    "Time from the request headers to the first streamed bytes (gen_ai.server.time_to_first_token).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
		}, []string{"endpoint", "provider", "model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_tokens_total",
			Help: "Tokens used, by type input or output (gen_ai.client.token.usage).",
		}, []string{"endpoint", "provider", "model", "type"}),
		limiter: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "modelgate_extproc_ratelimit_errors_total",
			Help: "Rate limiter calls that failed (admissions then fail open or closed as configured).",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "modelgate_extproc_panics_total",
			Help: "Panics recovered while processing a request; each failed that request alone with a 500.",
		}),
		budgetRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_budget_refusals_total",
			Help: "Requests refused with 429 insufficient_quota because a budget was spent, by the budget's subject (key, account, group).",
		}, []string{"subject"}),
		budgetAlerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_budget_alerts_total",
			Help: "Budgets with alerts whose spending reached 80 or 100 percent of the amount in a period, by subject and percent.",
		}, []string{"subject", "percent"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_upstream_attempts_total",
			Help: "Upstream attempts of models with Envoy fallback, by model and the backend Envoy chose.",
		}, []string{"model", "backend"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_upstream_retries_total",
			Help: "Upstream attempts after a request's first (retries and fallbacks), by model and the backend Envoy chose.",
		}, []string{"model", "backend"}),
		guards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_guardrail_results_total",
			Help: "What guardrail rules did to exchanges, by phase (request, response), check (regex, secrets) and result (allowed, blocked, masked, monitored).",
		}, []string{"phase", "check", "result"}),
		guardCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelgate_extproc_guardrail_service_duration_seconds",
			Help:    "Calls to guard services, by service type, phase and result (ok, error: failed or timed out).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"type", "phase", "result"}),
		routes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_extproc_model_routes_total",
			Help: "Requests routed, by the configured name the client's matched (a model id, an alias, a prefix alias such as claude-haiku-*, an auto model) and the model that served them.",
		}, []string{"name", "model"}),
		guardHold: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "modelgate_extproc_guardrail_hold_seconds",
			Help:    "How long response rules held a stream's first text before the client got it (the time to first token they add).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
	}
	for _, c := range append([]prometheus.Collector{m.requests, m.duration, m.ttft, m.tokens, m.limiter, m.panics,
		m.budgetRefusals, m.budgetAlerts, m.attempts, m.retries, m.guards, m.guardCalls, m.guardHold, m.routes}, m.genAI.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe records one finished exchange and the usage charged for it. A
// nil *Metrics records nothing.
func (m *Metrics) observe(o *outcome) {
	if m == nil {
		return
	}
	ep := o.endpoint.String()
	e := m.exchangeSeries(exchangeLabels{ep, o.provider, o.status})
	e.requests.Inc()
	e.duration.Observe(o.end.Sub(o.start).Seconds())
	for _, g := range o.guards {
		m.guards.WithLabelValues(g.Phase.String(), g.Check, string(g.Result)).Inc()
	}
	if o.guardHold > 0 {
		m.guardHold.Observe(o.guardHold.Seconds())
	}
	if !o.routed {
		return
	}
	if o.requestedAs != "" {
		m.routeSeries(routeLabels{o.requestedAs, o.model}).Inc()
	}
	m.genAI.observe(o, m.accounts)
	if !o.firstByte.IsZero() { // streams only: a series for them alone
		m.ttft.WithLabelValues(ep, o.provider, o.model).Observe(o.firstByte.Sub(o.start).Seconds())
	}
	us := m.usageSeries(usageLabels{ep, o.provider, o.model})
	us.input.Add(float64(o.usage.PromptTokens))
	us.output.Add(float64(o.usage.CompletionTokens))
}

func (m *Metrics) exchangeSeries(l exchangeLabels) *exchangeSeries {
	if s, ok := m.exchanges.Load(l); ok {
		return s.(*exchangeSeries)
	}
	s, _ := m.exchanges.LoadOrStore(l, &exchangeSeries{
		requests: m.requests.WithLabelValues(l.endpoint, l.provider, statusLabel(l.status)),
		duration: m.duration.WithLabelValues(l.endpoint, l.provider),
	})
	return s.(*exchangeSeries)
}

func (m *Metrics) usageSeries(l usageLabels) *usageSeries {
	if s, ok := m.usage.Load(l); ok {
		return s.(*usageSeries)
	}
	s, _ := m.usage.LoadOrStore(l, &usageSeries{
		input:  m.tokens.WithLabelValues(l.endpoint, l.provider, l.model, "input"),
		output: m.tokens.WithLabelValues(l.endpoint, l.provider, l.model, "output"),
	})
	return s.(*usageSeries)
}

func (m *Metrics) routeSeries(l routeLabels) prometheus.Counter {
	if c, ok := m.named.Load(l); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.named.LoadOrStore(l, m.routes.WithLabelValues(l.name, l.model))
	return c.(prometheus.Counter)
}

// panicked counts a recovered panic.
func (m *Metrics) panicked() {
	if m != nil {
		m.panics.Inc()
	}
}

// limiterError counts a failed rate limiter call.
func (m *Metrics) limiterError() {
	if m != nil {
		m.limiter.Inc()
	}
}

// budgetRefused counts a request a spent budget refused.
func (m *Metrics) budgetRefused(subject string) {
	if m != nil {
		m.budgetRefusals.WithLabelValues(subject).Inc()
	}
}

// budgetAlert counts a budget reaching an alert.
func (m *Metrics) budgetAlert(subject string, percent int) {
	if m != nil {
		m.budgetAlerts.WithLabelValues(subject, strconv.Itoa(percent)).Inc()
	}
}

// attempted counts one upstream attempt of a Fallback model; n is
// Envoy's attempt count (1 for the first, 0 when Envoy did not say).
func (m *Metrics) attempted(model, backend string, n int) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(model, backend).Inc()
	if n > 1 {
		m.retries.WithLabelValues(model, backend).Inc()
	}
}

// statusLabels are the status codes as label values, made once.
var statusLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(status int) string {
	if status >= 0 && status < len(statusLabels) {
		return statusLabels[status]
	}
	return strconv.Itoa(status)
}

// observeGuardCall records one call to a guard service.
func (m *Metrics) observeGuardCall(b *guard.Backend, p guard.Phase, took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.guardCalls.WithLabelValues(b.Type, p.String(), result).Observe(took.Seconds())
}
