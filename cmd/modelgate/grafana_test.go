package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"sigs.k8s.io/yaml"

	"modelgate/authz"
	"modelgate/authz/ledger/queue"
	"modelgate/authz/sqlite"
	"modelgate/extproc"
)

// The Grafana dashboard and the Prometheus alert rules under deploy/grafana
// name only metrics the gateway exports. The set of names is not written
// down here: it is what the gateway's own constructors describe to a
// Registerer.

const grafanaDir = "../../deploy/grafana"

// descRecorder is a prometheus.Registerer that keeps the name of every
// metric a collector describes.
type descRecorder struct{ names map[string]bool }

var descName = regexp.MustCompile(`^Desc\{fqName: "([^"]*)"`)

func (r *descRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var names []string
	for d := range ch {
		m := descName.FindStringSubmatch(d.String())
		if m == nil || m[1] == "" {
			for range ch { // let Describe finish
			}
			return fmt.Errorf("cannot read the name in %s", d)
		}
		names = append(names, m[1])
	}
	for _, n := range names {
		if r.names[n] {
			return fmt.Errorf("%s registered twice", n)
		}
	}
	for _, n := range names {
		r.names[n] = true
	}
	return nil
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *descRecorder) Unregister(prometheus.Collector) bool { return false }

// gatewayMetricNames is the name of every metric `modelgate serve` can
// export, as its constructors describe them.
func gatewayMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	rec := &descRecorder{names: map[string]bool{}}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := extproc.NewMetricsWith(rec, extproc.MetricsConfig{AccountLabels: true}); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "metrics.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := queue.New(store, rec, queue.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.NewCaptures(store, rec, queue.Config{}); err != nil { // with capture to the store
		t.Fatal(err)
	}
	registerAuthStats(rec, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}))
	registerStreamStats(rec, &streamCount{}, 1)
	newRetention(store, 30, 7, rec, zap.NewNop()) // with storage.usage_retention_days and stored captures
	for _, n := range []string{"modelgate_extproc_requests_total", "gen_ai_client_operation_duration_seconds",
		"modelgate_ledger_records_dropped_total", "modelgate_auth_store_errors_total", "modelgate_extproc_streams_limit",
		"go_goroutines", "process_cpu_seconds_total"} {
		if !rec.names[n] {
			t.Fatalf("the recorder missed %s; it has %v", n, sortedKeys(rec.names))
		}
	}
	return rec.names
}

// exportedMetrics is gatewayMetricNames with the series names a histogram
// or summary adds.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for n := range gatewayMetricNames(t) {
		names[n] = true
		// A Desc does not say its type: accept a histogram's (or a
		// summary's) series names for every metric.
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			names[n+suffix] = true
		}
	}
	return names
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// promqlWords are PromQL's functions, aggregators and keywords, and the
// functions of Grafana's Prometheus variable queries: identifiers that are
// not metric names.
var promqlWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
		and or unless by without on ignoring group_left group_right offset bool atan2 inf nan le start end
		abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week day_of_year
		days_in_month delta deriv exp floor histogram_avg histogram_count histogram_fraction histogram_quantile
		histogram_stddev histogram_stdvar histogram_sum double_exponential_smoothing holt_winters hour idelta
		increase info irate label_join label_replace ln log2 log10 minute month predict_linear rate resets round
		scalar sgn sort sort_desc sort_by_label sort_by_label_desc sqrt time timestamp vector year
		avg_over_time min_over_time max_over_time sum_over_time count_over_time quantile_over_time
		stddev_over_time stdvar_over_time last_over_time first_over_time present_over_time mad_over_time
		ts_of_min_over_time ts_of_max_over_time ts_of_last_over_time ts_of_first_over_time
		acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh deg rad pi
		label_values label_names metrics query_result`) {
		m[w] = true
	}
	return m
}()

// labelListWords are followed by a parenthesized list of label names.
var labelListWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

// promqlMetricNames returns the metric names in a PromQL expression (or a
// Grafana variable query such as label_values(metric, label)), in order:
// identifiers outside label matchers, label lists, string literals, range
// brackets and Grafana variables that are not PromQL's own words. An
// unknown function name counts as a metric name, so a typo is caught too.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	depth := 0 // parentheses
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // a comment, to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$': // a Grafana variable: $name, ${name}, ${name:format}
			i++
			if i < len(s) && s[i] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed ${ in %q", expr)
				}
				i += end + 1
			} else {
				for i < len(s) && isIdentChar(s[i]) {
					i++
				}
			}
		case c == '{': // label matchers; a __name__ matcher names a metric
			end, name, err := skipMatchers(s, i)
			if err != nil {
				return nil, err
			}
			if name != "" {
				names = append(names, name)
			}
			i = end
		case c == '[': // a range or subquery: durations and variables
			n := 0
			j := i
			for ; j < len(s); j++ {
				if s[j] == '[' {
					n++
				} else if s[j] == ']' {
					n--
					if n == 0 {
						break
					}
				}
			}
			if j == len(s) {
				return nil, fmt.Errorf("unclosed [ in %q", expr)
			}
			i = j + 1
		case c == ']' || c == '}':
			return nil, fmt.Errorf("unbalanced %c in %q", c, expr)
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("unbalanced ) in %q", expr)
			}
			i++
		case '0' <= c && c <= '9' || c == '.' && i+1 < len(s) && '0' <= s[i+1] && s[i+1] <= '9':
			// a number or a duration: 0.95, 1e3, 0x1f, 5m, 1h30m
			for i < len(s) && (isIdentChar(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			word := s[i:j]
			i = j
			lower := strings.ToLower(word)
			switch {
			case labelListWords[lower]:
				k := skipSpace(s, i)
				if k < len(s) && s[k] == '(' {
					end := strings.IndexByte(s[k:], ')')
					if end < 0 {
						return nil, fmt.Errorf("unclosed label list after %s in %q", word, expr)
					}
					i = k + end + 1
				}
			case lower == "label_values":
				// label_values(label) or label_values(selector, label):
				// only the selector can name a metric.
				k := skipSpace(s, i)
				if k >= len(s) || s[k] != '(' {
					return nil, fmt.Errorf("label_values without ( in %q", expr)
				}
				end, err := closeParen(s, k)
				if err != nil {
					return nil, err
				}
				args := s[k+1 : end]
				if comma := lastTopLevelComma(args); comma >= 0 {
					inner, err := promqlMetricNames(args[:comma])
					if err != nil {
						return nil, err
					}
					names = append(names, inner...)
				}
				i = end + 1
			case promqlWords[lower]:
			default:
				names = append(names, word)
			}
		default: // operators, commas, @
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	return names, nil
}

func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
		i++
	}
	return i
}

// skipString returns the index after the string literal starting at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string in %q", s)
}

var nameMatcher = regexp.MustCompile(`^__name__\s*=\s*$`)

// skipMatchers returns the index after the label matchers starting at i,
// and the metric a __name__="..." matcher among them names.
func skipMatchers(s string, i int) (end int, name string, err error) {
	last := i + 1 // where the current matcher starts
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			k, err := skipString(s, j)
			if err != nil {
				return 0, "", err
			}
			if nameMatcher.MatchString(strings.TrimSpace(s[last:j])) {
				name = s[j+1 : k-1]
			}
			j = k - 1
		case ',':
			last = j + 1
		case '}':
			return j + 1, name, nil
		case '{', '[', '(':
			return 0, "", fmt.Errorf("%c inside label matchers in %q", s[j], s)
		}
	}
	return 0, "", fmt.Errorf("unclosed { in %q", s)
}

// closeParen returns the index of the ) closing the ( at i.
func closeParen(s string, i int) (int, error) {
	n := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			k, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = k - 1
		case '(':
			n++
		case ')':
			if n--; n == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed ( in %q", s)
}

// lastTopLevelComma is the index of the last comma of args outside
// brackets, braces, parentheses and strings, or -1.
func lastTopLevelComma(args string) int {
	at, n := -1, 0
	for j := 0; j < len(args); j++ {
		switch args[j] {
		case '"', '\'', '`':
			if k, err := skipString(args, j); err == nil {
				j = k - 1
			}
		case '(', '[', '{':
			n++
		case ')', ']', '}':
			n--
		case ',':
			if n == 0 {
				at = j
			}
		}
	}
	return at
}

// unknownMetrics returns the metric names in expr the gateway does not
// export.
func unknownMetrics(expr string, exported map[string]bool) ([]string, error) {
	names, err := promqlMetricNames(expr)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no metric in %q", expr)
	}
	var unknown []string
	for _, n := range names {
		if !exported[n] {
			unknown = append(unknown, n)
		}
	}
	return unknown, nil
}

func TestGrafanaPromQLMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.95, sum by (le, gen_ai_request_model) (rate(gen_ai_server_time_to_first_token_seconds_bucket{gen_ai_request_model=~"$model"}[$__rate_interval])))`,
			[]string{"gen_ai_server_time_to_first_token_seconds_bucket"}},
		{`sum(rate(modelgate_extproc_requests_total{status=~"5.."}[5m])) / sum(rate(modelgate_extproc_requests_total[5m])) > 0.05`,
			[]string{"modelgate_extproc_requests_total", "modelgate_extproc_requests_total"}},
		{`sum(rate(x_total[5m])) by (endpoint, status) / ignoring(status) group_left sum without (status) (rate(y_total[1h:5m] offset 1d))`,
			[]string{"x_total", "y_total"}},
		{`a / on(instance) group_left(version) b and bool c unless d or absent(e)`,
			[]string{"a", "b", "c", "d", "e"}},
		{`label_replace(sum by (error_type) (rate(m_count{error_type=""}[$__rate_interval])), "error_type", "success", "error_type", "")`,
			[]string{"m_count"}},
		{`label_values(gen_ai_client_operation_duration_seconds_count{gen_ai_provider_name=~"$provider"}, gen_ai_request_model)`,
			[]string{"gen_ai_client_operation_duration_seconds_count"}},
		{`label_values(gen_ai_request_model)`, nil},
		{`{__name__="up", job="x"} + on() vector(1) # a comment naming not_a_metric`, []string{"up"}},
		{`rate(m[$__interval]) * 1e3 + ${factor} * $scale - Inf + NaN + time() + 0x1f + .5`, []string{"m"}},
		{`max_over_time(m{a="}", b='{[('}[5m:30s]) @ start()`, []string{"m"}},
		{`raet(m[5m])`, []string{"raet", "m"}}, // a misspelt function is reported
	} {
		got, err := promqlMetricNames(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`sum(rate(m[5m])`, `rate(m[5m]))`, `m{a="b"`, `m[5m`, `m{a="b}`, `m}`} {
		if _, err := promqlMetricNames(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// The checker the dashboard and rules go through reports what it should,
// and nothing else.
func TestGrafanaCheckerCatchesUnknownMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	t.Run("unknown metric", func(t *testing.T) {
		unknown, err := unknownMetrics(`rate(modelgate_not_a_metric_total[5m])`, exported)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(unknown, []string{"modelgate_not_a_metric_total"}) {
			t.Errorf("got %q, want modelgate_not_a_metric_total reported", unknown)
		}
	})
	t.Run("misspelt suffix", func(t *testing.T) {
		unknown, err := unknownMetrics(`sum(rate(gen_ai_server_time_to_first_token_seconds_buckets[5m]))`, exported)
		if err != nil || len(unknown) != 1 {
			t.Errorf("got %q, %v; want the misspelt name reported", unknown, err)
		}
	})
	t.Run("labels are not metrics", func(t *testing.T) {
		expr := `sum by (gen_ai_request_model) (rate(gen_ai_client_operation_duration_seconds_count{error_type=""}[5m]))`
		unknown, err := unknownMetrics(expr, exported)
		if err != nil {
			t.Fatal(err)
		}
		if len(unknown) != 0 {
			t.Errorf("reported %q in %s", unknown, expr)
		}
	})
}

// grafanaDashboard is the part of a dashboard the tests read.
type grafanaDashboard struct {
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *grafanaDS      `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *grafanaDS     `json:"datasource"`
	Panels     []grafanaPanel `json:"panels"` // a collapsed row's
	Targets    []struct {
		Expr       string     `json:"expr"`
		Datasource *grafanaDS `json:"datasource"`
	} `json:"targets"`
}

// dashboardPanels is every panel, rows' included, rows left out.
func dashboardPanels(ps []grafanaPanel) []grafanaPanel {
	var out []grafanaPanel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, dashboardPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// dashboardExprs maps each PromQL expression of the dashboard to where it
// is: panel targets and the query variables.
func dashboardExprs(t *testing.T, d *grafanaDashboard) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	for _, p := range dashboardPanels(d.Panels) {
		for i, tg := range p.Targets {
			exprs[tg.Expr] = fmt.Sprintf("panel %q target %d", p.Title, i)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("variable %s: query is %s", v.Name, v.Query)
			}
			q = obj.Query
		}
		if q == "" {
			t.Errorf("variable %s has no query", v.Name)
		}
		exprs[q] = "variable " + v.Name
		if v.Definition != "" {
			exprs[v.Definition] = "variable " + v.Name + " definition"
		}
	}
	return exprs
}

func readDashboard(t *testing.T) *grafanaDashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(grafanaDir, "modelgate-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("modelgate-dashboard.json: %v", err)
	}
	return &d
}

func TestGrafanaDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" {
		t.Error("the dashboard has no title")
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want a current one", d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for name, typ := range map[string]string{"datasource": "datasource", "model": "query", "provider": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s is %q, want a %s variable", name, vars[name], typ)
		}
	}
	ids := map[int]bool{}
	var withTargets int
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		for _, c := range p.Panels {
			if ids[c.ID] {
				t.Errorf("panel id %d is used twice", c.ID)
			}
			ids[c.ID] = true
		}
	}
	for _, p := range dashboardPanels(d.Panels) {
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if len(p.Targets) == 0 {
			continue
		}
		withTargets++
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable", p.Title)
		}
		for i, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %d has no expr", p.Title, i)
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %d does not use the ${datasource} variable", p.Title, i)
			}
		}
	}
	if withTargets < 8 {
		t.Errorf("%d panels with queries, want at least 8", withTargets)
	}
	exported := exportedMetrics(t)
	for expr, where := range dashboardExprs(t, d) {
		unknown, err := unknownMetrics(expr, exported)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		for _, n := range unknown {
			t.Errorf("%s names %s, which the gateway does not export: %s", where, n, expr)
		}
	}
}

// Every metric of the gateway's own (modelgate_*, gen_ai_*) is on the
// dashboard: a new metric gets a panel.
func TestGrafanaDashboardCoversGatewayMetrics(t *testing.T) {
	d := readDashboard(t)
	used := map[string]bool{}
	for expr := range dashboardExprs(t, d) {
		names, err := promqlMetricNames(expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			used[n] = true
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				used[strings.TrimSuffix(n, suffix)] = true
			}
		}
	}
	for _, n := range sortedKeys(gatewayMetricNames(t)) {
		if !strings.HasPrefix(n, "modelgate_") && !strings.HasPrefix(n, "gen_ai_") {
			continue
		}
		if !used[n] {
			t.Errorf("no dashboard panel shows %s", n)
		}
	}
}

// promRuleGroups is a Prometheus rule file, decoded strictly.
type promRuleGroups struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert         string            `json:"alert,omitempty"`
			Record        string            `json:"record,omitempty"`
			Expr          string            `json:"expr"`
			For           string            `json:"for,omitempty"`
			KeepFiringFor string            `json:"keep_firing_for,omitempty"`
			Labels        map[string]string `json:"labels,omitempty"`
			Annotations   map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func readAlertRules(t *testing.T) *promRuleGroups {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(grafanaDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules promRuleGroups
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	return &rules
}

func TestGrafanaAlertRules(t *testing.T) {
	rules := readAlertRules(t)
	exported := exportedMetrics(t)
	duration := regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		if g.Name == "" {
			t.Error("a rule group has no name")
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is no alert: %+v", g.Name, r)
				continue
			}
			if alerts[r.Alert] {
				t.Errorf("alert %s is there twice", r.Alert)
			}
			alerts[r.Alert] = true
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("alert %s has no expr", r.Alert)
			}
			if r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s needs a summary and a description", r.Alert)
			}
			if r.For != "" && r.For != "0" && !duration.MatchString(r.For) {
				t.Errorf("alert %s: for %q is no duration", r.Alert, r.For)
			}
			unknown, err := unknownMetrics(r.Expr, exported)
			if err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
			for _, n := range unknown {
				t.Errorf("alert %s names %s, which the gateway does not export: %s", r.Alert, n, r.Expr)
			}
		}
	}
	// What the README says each alert watches.
	for alert, metric := range map[string]string{
		"ModelgateHighErrorRatio":       "modelgate_extproc_requests_total",
		"ModelgateUsageRecordsDropped":  "modelgate_ledger_records_dropped_total",
		"ModelgateCapturesDropped":      "modelgate_capture_records_dropped_total",
		"ModelgateLedgerWriteErrors":    "modelgate_ledger_write_errors_total",
		"ModelgateRateLimiterErrors":    "modelgate_extproc_ratelimit_errors_total",
		"ModelgateExtProcSaturated":     "modelgate_extproc_streams_limit",
		"ModelgateAuthStoreErrors":      "modelgate_auth_store_errors_total",
		"ModelgatePanics":               "modelgate_extproc_panics_total",
		"ModelgateSlowTimeToFirstToken": "gen_ai_server_time_to_first_token_seconds_bucket",
	} {
		found := false
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert == alert {
					names, _ := promqlMetricNames(r.Expr)
					found = slices.Contains(names, metric)
				}
			}
		}
		if !found {
			t.Errorf("no alert %s on %s", alert, metric)
		}
	}
	readme, err := os.ReadFile(filepath.Join(grafanaDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for alert := range alerts {
		if !strings.Contains(string(readme), alert) {
			t.Errorf("deploy/grafana/README.md does not say what %s means", alert)
		}
	}
}

// prometheusrule.yaml holds alerts.yaml's groups for the Prometheus
// Operator.
func TestGrafanaPrometheusRule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(grafanaDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace,omitempty"`
			Labels    map[string]string `json:"labels,omitempty"`
		} `json:"metadata"`
		Spec promRuleGroups `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Errorf("prometheusrule.yaml is %s %s %q, want a named monitoring.coreos.com/v1 PrometheusRule",
			pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	if rules := readAlertRules(t); !reflect.DeepEqual(pr.Spec, *rules) {
		t.Error("prometheusrule.yaml's spec.groups differ from alerts.yaml's groups")
	}
}
