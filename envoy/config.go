package envoy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"modelgate/envoy/routing"
)

// ExtProcCluster is the name of the cluster of the ext_proc server; no
// backend may use it.
const ExtProcCluster = "modelgate_extproc"

// Defaults for the zero values of Config.
const (
	defaultListen            = "0.0.0.0:8080"
	defaultMessageTimeout    = 10 * time.Second
	defaultBufferLimit       = 32 << 20
	defaultStreamIdleTimeout = 300 * time.Second
	defaultRequestTimeout    = 120 * time.Second
	defaultCAFile            = "/etc/ssl/certs/ca-certificates.crt"
	defaultAdminListen       = "127.0.0.1:9901"
	// defaultMaxRequests lifts Envoy's circuit breakers (1,024 requests,
	// pending requests and connections per cluster by default), which
	// would cap the whole gateway at 1,024 requests in flight: each holds
	// a stream to the ext_proc server.
	defaultMaxRequests = 100000
)

// maxMessageTimeout is the upper bound of ext_proc's message_timeout.
const maxMessageTimeout = time.Hour

// Config is what the bootstrap is generated from.
type Config struct {
	// Listen is the client-facing host:port; the host must be an IP
	// address, as for any Envoy listener. Zero means 0.0.0.0:8080.
	Listen string
	// ExtProcAddress is host:port of `modelgate serve`. An IP address
	// gives a STATIC cluster, a hostname a STRICT_DNS one. Required.
	ExtProcAddress string
	// MessageTimeout is the ext_proc per-message timeout, at most 1h.
	// Zero means 10s (Envoy's own default of 200ms is too short for
	// rewriting large bodies).
	MessageTimeout time.Duration
	// BufferLimitBytes is per_connection_buffer_limit_bytes of the
	// listener and of every cluster. Envoy's default of 1 MiB would cut
	// large request bodies. Zero means 32 MiB.
	BufferLimitBytes uint32
	// StreamIdleTimeout ends streams idle this long, downstream or
	// upstream; it is raised to outlast every route's ResponseHeaders and
	// StreamIdle by idleMargin (longestPath). Zero means 300s.
	StreamIdleTimeout time.Duration
	// RequestTimeout bounds receiving the client's whole request (the
	// connection manager's request_timeout): 408 while the body is still
	// arriving. Zero means 120s.
	RequestTimeout time.Duration
	// RoutingHeader is the request header the ext_proc server sets to the
	// backend name; routes match on it. It must not start with x-envoy-,
	// which ext_proc may not set. Zero means x-modelgate-backend.
	RoutingHeader string
	// MetadataNamespace is the dynamic metadata namespace Envoy accepts
	// from the ext_proc server. Zero means io.modelgate.
	MetadataNamespace string
	// CAFile is the CA bundle that verifies https backends. Zero means
	// /etc/ssl/certs/ca-certificates.crt.
	CAFile string
	// AdminListen is the IP:port of Envoy's admin interface (/ready,
	// /stats). It can stop Envoy and change its logging: keep it on
	// loopback. Zero means 127.0.0.1:9901.
	AdminListen string
	// MaxRequests is every cluster's circuit-breaker threshold: the most
	// requests in flight (and pending requests and connections) to the
	// ext_proc server and to each backend. Zero means 100,000.
	MaxRequests uint32
	// AccessLog is where Envoy writes one JSON line per request, with the
	// token usage the ext_proc server reports. Zero means stdout.
	AccessLog AccessLog
	// UseRemoteAddress makes Envoy take the client's address from the
	// connection, append it to x-forwarded-for and replace the client's
	// x-request-id and x-envoy-* headers: for an Envoy at the edge. Off,
	// the client address comes from x-forwarded-for, which clients can
	// forge.
	UseRemoteAddress bool
	// XffNumTrustedHops is how many proxies in front of Envoy append to
	// x-forwarded-for; the client address is the entry before theirs.
	XffNumTrustedHops uint32
	// Routing is what the routes and clusters are made of. Each backend
	// becomes a cluster and routes, in this order; a model with timeouts
	// of its own gets routes of its own on each of its backends, before
	// the backend's, and a model with fallback a cluster and routes of its
	// own, before every backend's. Envoy takes the backends' names, base
	// URLs and timeouts, and the models' ids, deployments, timeouts and
	// fallback.
	Routing routing.Table
	// Tracing turns on Envoy's own OpenTelemetry tracing; off when its
	// Collector is empty.
	Tracing Tracing
	// EnvoyVersion is the Envoy release that will run the bootstrap; the
	// zero Version means the reference release (1.37 or later). Bootstrap
	// refuses a release that lacks what the config needs (checkVersion).
	EnvoyVersion Version
}

// AccessLog selects the access log's output.
type AccessLog string

// The access log outputs.
const (
	AccessLogStdout AccessLog = "stdout"
	AccessLogStderr AccessLog = "stderr"
	AccessLogNone   AccessLog = "none"
)

// modelTimeouts are a public model's own timeouts on one backend, Or'd
// with the backend's.
type modelTimeouts struct {
	// model is the public model id, as the ext_proc server sets it in
	// routing.ModelHeader.
	model    string
	timeouts routing.Timeouts
}

// ownTimeouts lists the models b serves that have timeouts of their
// own, in the table's order: each gets routes of its own on b.
func (c Config) ownTimeouts(b routing.Backend) []modelTimeouts {
	var out []modelTimeouts
	for _, m := range c.Routing.Models {
		if m.Timeouts == (routing.Timeouts{}) || !servedBy(m, b.Name) {
			continue
		}
		out = append(out, modelTimeouts{model: m.ID, timeouts: m.Timeouts.Or(b.Timeouts)})
	}
	return out
}

func servedBy(m routing.Model, backend string) bool {
	for _, d := range m.Deployments {
		if d.Backend == backend {
			return true
		}
	}
	return false
}

// withDefaults fills in the zero values.
func (c Config) withDefaults() Config {
	setDefault(&c.Listen, defaultListen)
	setDefault(&c.RoutingHeader, routing.Header)
	setDefault(&c.MetadataNamespace, routing.MetadataNamespace)
	setDefault(&c.CAFile, defaultCAFile)
	setDefault(&c.AdminListen, defaultAdminListen)
	setDefault(&c.Tracing.ServiceName, "modelgate-envoy")
	if c.AccessLog == "" {
		c.AccessLog = AccessLogStdout
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = defaultMaxRequests
	}
	if c.MessageTimeout == 0 {
		c.MessageTimeout = defaultMessageTimeout
	}
	if c.BufferLimitBytes == 0 {
		c.BufferLimitBytes = defaultBufferLimit
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = defaultStreamIdleTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.StreamIdleTimeout > 0 {
		c.StreamIdleTimeout = max(c.StreamIdleTimeout, c.longestPath()+idleMargin)
	}
	return c
}

// idleMargin keeps the connection manager's idle timer behind the
// routes' own timers, so that a route's timeout, with its clearer reply,
// fires first.
const idleMargin = 10 * time.Second

// longestPath is the longest silence any route allows: a model's wait
// for its answer to start, or the longest gap in a stream. The connection
// manager's stream_idle_timeout must outlast both. Its timer is restarted
// by every header and data event of the stream, in either direction
// (filter_manager.cc, resetIdleTimer at the start of encodeHeaders and
// encodeData: the provider's body counts even while ext_proc buffers it),
// and by nothing else: while a provider works on an answer and has sent no
// byte, nothing restarts it, so with the idle timeout below a route's
// per_try_timeout a long answer is cut with 504 "stream timeout" whatever
// the model allows.
func (c Config) longestPath() time.Duration {
	var d time.Duration
	add := func(t routing.Timeouts) { d = max(d, t.ResponseHeaders, t.StreamIdle) }
	for _, b := range c.Routing.Backends {
		add(b.Timeouts)
		for _, m := range c.ownTimeouts(b) {
			add(m.timeouts)
		}
	}
	for _, f := range c.fallbacks() {
		add(f.timeouts)
	}
	return d
}

func setDefault(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

var (
	// backendName is a valid Envoy cluster name and a header value that
	// needs no quoting; the gateway config uses the same rule.
	backendName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	// headerName is a lower-case HTTP token, as Envoy sends header names.
	headerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	// namespaceName is a metadata namespace such as io.modelgate.
	namespaceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// checkSettings validates everything but the addresses and backends.
func (c Config) checkSettings() []error {
	var errs []error
	if c.MessageTimeout < 0 || c.MessageTimeout > maxMessageTimeout {
		errs = append(errs, fmt.Errorf("message timeout %v: must be between 0 and %v", c.MessageTimeout, maxMessageTimeout))
	}
	if c.StreamIdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("stream idle timeout %v: must not be negative", c.StreamIdleTimeout))
	}
	if !headerName.MatchString(c.RoutingHeader) || strings.HasPrefix(c.RoutingHeader, "x-envoy-") || c.RoutingHeader == "host" {
		errs = append(errs, fmt.Errorf("routing header %q: must be a lower-case header name, not host or x-envoy-* (ext_proc may not set those)", c.RoutingHeader))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("request timeout %v: must not be negative", c.RequestTimeout))
	}
	if c.RoutingHeader == routing.ModelHeader || c.RoutingHeader == routing.StreamHeader {
		errs = append(errs, fmt.Errorf("routing header %q: taken by the gateway", c.RoutingHeader))
	}
	if !namespaceName.MatchString(c.MetadataNamespace) {
		errs = append(errs, fmt.Errorf("metadata namespace %q: must be letters, digits, '.', '_' or '-'", c.MetadataNamespace))
	}
	switch c.AccessLog {
	case AccessLogStdout, AccessLogStderr, AccessLogNone:
	default:
		errs = append(errs, fmt.Errorf("access log %q: must be %s, %s or %s", c.AccessLog, AccessLogStdout, AccessLogStderr, AccessLogNone))
	}
	return errs
}

// checkAdmin checks the admin address, which needs an IP address like a
// listener and may not share the listener's port.
func (c Config) checkAdmin() (string, uint32, error) {
	host, port, err := splitAddress(c.AdminListen, true)
	if err != nil {
		return "", 0, fmt.Errorf("admin address: %w", err)
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("admin address %q: Envoy's admin interface needs an IP address, not a hostname", c.AdminListen)
	}
	if lhost, lport, err := splitAddress(c.Listen, true); err == nil && port != 0 && port == lport && overlap(host, lhost) {
		return "", 0, fmt.Errorf("admin address %q: takes the port of the listener %q", c.AdminListen, c.Listen)
	}
	return host, port, nil
}

// overlap reports whether two listening IP addresses can collide on one
// port: the same address, or either one a wildcard.
func overlap(a, b string) bool {
	ia, ib := net.ParseIP(a), net.ParseIP(b)
	return ia == nil || ib == nil || ia.Equal(ib) || ia.IsUnspecified() || ib.IsUnspecified()
}

// upstream is a parsed backend.
type upstream struct {
	name     string
	host     string // without brackets for IPv6
	port     uint32
	tls      bool
	timeouts routing.Timeouts
	models   []modelTimeouts
}

// isIP reports whether the host is an IP literal (a STATIC cluster).
func (u upstream) isIP() bool { return net.ParseIP(u.host) != nil }

// authority is the Host header for the backend: the port only when it is
// not the scheme's default.
func (u upstream) authority() string {
	if u.port == defaultPort(u.tls) {
		if strings.Contains(u.host, ":") {
			return "[" + u.host + "]"
		}
		return u.host
	}
	return net.JoinHostPort(u.host, strconv.Itoa(int(u.port)))
}

func defaultPort(tls bool) uint32 {
	if tls {
		return 443
	}
	return 80
}

// parseBackends checks every backend, with its models' timeouts, and the
// names across them.
func (c Config) parseBackends() ([]upstream, []error) {
	var (
		ups  []upstream
		errs []error
	)
	seen := map[string]bool{}
	for i, b := range c.Routing.Backends {
		up, err := parseBackend(b, c.ownTimeouts(b))
		if err != nil {
			errs = append(errs, fmt.Errorf("backends[%d] %q: %w", i, b.Name, err))
			continue
		}
		if seen[up.name] {
			errs = append(errs, fmt.Errorf("backends[%d] %q: duplicate backend name", i, b.Name))
			continue
		}
		seen[up.name] = true
		ups = append(ups, up)
	}
	return ups, errs
}

func parseBackend(b routing.Backend, models []modelTimeouts) (upstream, error) {
	if !backendName.MatchString(b.Name) {
		return upstream{}, errors.New("name must be 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if b.Name == ExtProcCluster {
		return upstream{}, fmt.Errorf("name %q is reserved for the ext_proc cluster", b.Name)
	}
	u, err := url.Parse(b.BaseURL)
	switch {
	case err != nil:
		return upstream{}, fmt.Errorf("parsing base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return upstream{}, fmt.Errorf("base URL %q: scheme must be http or https", b.BaseURL)
	case u.Hostname() == "":
		return upstream{}, fmt.Errorf("base URL %q: has no host", b.BaseURL)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return upstream{}, fmt.Errorf("base URL %q: must not have user info, a query or a fragment", b.BaseURL)
	}
	if err := checkTimeouts(b.Timeouts); err != nil {
		return upstream{}, err
	}
	seen := map[string]bool{}
	for _, m := range models {
		if !headerValue(m.model) {
			return upstream{}, fmt.Errorf("model %q: must be non-empty without control characters (it is a header value)", m.model)
		}
		if seen[m.model] {
			return upstream{}, fmt.Errorf("model %q: timeouts given twice", m.model)
		}
		seen[m.model] = true
		if err := checkTimeouts(m.timeouts); err != nil {
			return upstream{}, fmt.Errorf("model %q: %w", m.model, err)
		}
	}
	up := upstream{name: b.Name, host: u.Hostname(), tls: u.Scheme == "https", timeouts: b.Timeouts, models: models}
	up.port = defaultPort(up.tls)
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return upstream{}, fmt.Errorf("base URL %q: port must be 1-65535", b.BaseURL)
		}
		up.port = uint32(n)
	}
	return up, nil
}

// headerValue reports whether a model id can be matched as a header
// value: non-empty, without control characters.
func headerValue(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func checkTimeouts(t routing.Timeouts) error {
	if t.ResponseHeaders < 0 || t.StreamIdle < 0 {
		return fmt.Errorf("timeouts must not be negative (response headers %v, stream idle %v)", t.ResponseHeaders, t.StreamIdle)
	}
	return nil
}

// splitAddress parses host:port. Port 0 is allowed only for a listener,
// where it means any free port.
func splitAddress(addr string, zeroPort bool) (string, uint32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 && !zeroPort {
		return "", 0, fmt.Errorf("address %q: port must be 1-65535", addr)
	}
	if host == "" {
		return "", 0, fmt.Errorf("address %q: has no host", addr)
	}
	return host, uint32(port), nil
}
