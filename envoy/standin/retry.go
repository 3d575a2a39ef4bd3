package standin

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
)

// retry_on conditions (router/router.h RetryPolicy::RETRY_ON_*).
const (
	retryOn5xx uint32 = 1 << iota
	retryOnGatewayError
	retryOnConnectFailure
	retryOnEnvoyRateLimited
	retryOnRetriable4xx
	retryOnRefusedStream
	retryOnRetriableStatusCodes
	retryOnRetriableHeaders
	retryOnReset
	retryOnResetBeforeRequest
	retryOnHTTP3PostConnectFailure
)

var retryOnTokens = map[string]uint32{
	"5xx": retryOn5xx, "gateway-error": retryOnGatewayError, "connect-failure": retryOnConnectFailure,
	"envoy-ratelimited": retryOnEnvoyRateLimited, "retriable-4xx": retryOnRetriable4xx,
	"refused-stream": retryOnRefusedStream, "retriable-status-codes": retryOnRetriableStatusCodes,
	"retriable-headers": retryOnRetriableHeaders, "reset": retryOnReset,
	"reset-before-request": retryOnResetBeforeRequest, "http3-post-connect-failure": retryOnHTTP3PostConnectFailure,
}

// grpcRetryOn are the gRPC conditions, which a route's retry_on also takes
// (RetryPolicyImpl parses it both ways); the stand-in does not implement
// them.
var grpcRetryOn = []string{"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}

// parseRetryOn is RetryStateImpl::parseRetryOn: a comma list, unknown
// tokens dropped silently (RetryPolicyImpl keeps only the bits).
func parseRetryOn(s string) uint32 {
	var out uint32
	for _, t := range strings.Split(s, ",") {
		out |= retryOnTokens[strings.TrimSpace(t)]
	}
	return out
}

// retryPolicy is a route's retry_policy (router/config_impl.cc,
// RetryPolicyImpl).
type retryPolicy struct {
	retryOn     uint32
	numRetries  uint32 // default 1
	statusCodes []uint32
	// previousPriorities is previous_priorities' update_frequency; 0
	// without it.
	previousPriorities int
	previousHosts      bool
	// hostSelectionMaxAttempts is host_selection_retry_max_attempts
	// (default 1): extra picks while previous_hosts rejects the host.
	hostSelectionMaxAttempts  int
	baseInterval, maxInterval time.Duration
	resetHeaders              []*routev3.RetryPolicy_ResetHeader
	resetMaxInterval          time.Duration
}

// retryPolicyFields are the RetryPolicy fields the stand-in implements.
var retryPolicyFields = []string{"retry_on", "num_retries", "per_try_timeout", "per_try_idle_timeout", "retry_priority",
	"retry_host_predicate", "host_selection_retry_max_attempts", "retriable_status_codes", "retry_back_off",
	"rate_limited_retry_back_off"}

func compileRetryPolicy(route string, rp *routev3.RetryPolicy) (*retryPolicy, error) {
	if rp == nil {
		return nil, nil
	}
	if extra := extraFields(rp, retryPolicyFields...); len(extra) > 0 {
		return nil, unsupported("route %q: retry_policy %v", route, extra)
	}
	if err := rp.ValidateAll(); err != nil {
		return nil, fmt.Errorf("standin: route %q: retry_policy is invalid: %w", route, err)
	}
	for _, t := range strings.Split(rp.GetRetryOn(), ",") {
		for _, g := range grpcRetryOn {
			if strings.TrimSpace(t) == g {
				return nil, unsupported("route %q: retry_on %q (gRPC retry conditions are not implemented)", route, g)
			}
		}
	}
	p := &retryPolicy{retryOn: parseRetryOn(rp.GetRetryOn()), numRetries: 1, statusCodes: rp.GetRetriableStatusCodes(),
		hostSelectionMaxAttempts: 1, baseInterval: 25 * time.Millisecond, resetMaxInterval: 300 * time.Second}
	if n := rp.GetNumRetries(); n != nil {
		p.numRetries = n.GetValue()
	}
	if n := rp.GetHostSelectionRetryMaxAttempts(); n != 0 {
		p.hostSelectionMaxAttempts = int(n)
	}
	if rpr := rp.GetRetryPriority(); rpr != nil {
		cfg := &previousprioritiesv3.PreviousPrioritiesConfig{}
		if rpr.GetTypedConfig() == nil || rpr.GetTypedConfig().UnmarshalTo(cfg) != nil {
			return nil, unsupported("route %q: retry_priority %q (only envoy.retry_priorities.previous_priorities)", route, rpr.GetName())
		}
		if cfg.GetUpdateFrequency() <= 0 {
			return nil, fmt.Errorf("standin: route %q: previous_priorities update_frequency must be greater than 0", route)
		}
		p.previousPriorities = int(cfg.GetUpdateFrequency())
	}
	for _, pr := range rp.GetRetryHostPredicate() {
		if pr.GetTypedConfig() == nil || pr.GetTypedConfig().UnmarshalTo(&previoushostsv3.PreviousHostsPredicate{}) != nil {
			return nil, unsupported("route %q: retry_host_predicate %q (only envoy.retry_host_predicates.previous_hosts)", route, pr.GetName())
		}
		p.previousHosts = true
	}
	if bo := rp.GetRetryBackOff(); bo != nil {
		// Under 1ms becomes 1ms; a maximum below the base is an error
		// (RetryPolicyImpl).
		p.baseInterval = max(bo.GetBaseInterval().AsDuration().Truncate(time.Millisecond), time.Millisecond)
		if bo.GetMaxInterval() != nil {
			p.maxInterval = max(bo.GetMaxInterval().AsDuration().Truncate(time.Millisecond), time.Millisecond)
			if p.maxInterval < p.baseInterval {
				return nil, fmt.Errorf("standin: route %q: retry_policy.max_interval must greater than or equal to the base_interval", route)
			}
		}
	}
	if p.maxInterval == 0 {
		p.maxInterval = 10 * p.baseInterval
	}
	if rl := rp.GetRateLimitedRetryBackOff(); rl != nil {
		p.resetHeaders = rl.GetResetHeaders()
		if d := rl.GetMaxInterval(); d != nil {
			p.resetMaxInterval = d.AsDuration().Truncate(time.Millisecond)
		}
	}
	return p, nil
}

// retryDecision is RetryStatus.
type retryDecision int

const (
	retryNo retryDecision = iota
	retryYes
	retryLimitExceeded // URX
	retryOverflow      // UO
)

// resetKind is how an attempt failed before its response.
type resetKind int

const (
	resetConnectFailure resetKind = iota // local or remote connection failure
	resetRemote                          // connection termination or protocol error
	resetPerTry                          // per_try_timeout or per_try_idle_timeout: a local reset
)

// retryState is one request's RetryStateImpl, with its previous_hosts and
// previous_priorities plugins.
type retryState struct {
	p           *retryPolicy
	c           *cluster
	retryOn     uint32
	statusCodes []uint32
	remaining   uint32
	holding     bool // one of the cluster's max_retries slots
	retried     bool // is_retry_: an attempt after the first
	next        time.Duration
	random      func() uint64
	clock       Clock
	// previous_hosts
	tried []*host
	// previous_priorities
	ppTried  []*host
	excluded []bool
	ppLoad   []uint32
}

// newRetryState is RetryStateImpl::create: a retry state exists when
// retry_on (the route's or x-envoy-retry-on) names anything; it consumes
// the x-envoy retry headers either way.
func (x *exchange) newRetryState(p *retryPolicy, c *cluster) *retryState {
	h := x.headers
	retryOnHdr, hasRetryOn := h.get("x-envoy-retry-on")
	maxRetries, hasMax := h.get("x-envoy-max-retries")
	codes, hasCodes := h.get("x-envoy-retriable-status-codes")
	for _, k := range []string{"x-envoy-retry-on", "x-envoy-retry-grpc-on", "x-envoy-max-retries",
		"x-envoy-hedge-on-per-try-timeout", "x-envoy-retriable-header-names", "x-envoy-retriable-status-codes"} {
		h = h.del(k)
	}
	x.headers = h
	if p == nil {
		p = &retryPolicy{numRetries: 1, hostSelectionMaxAttempts: 1, baseInterval: 25 * time.Millisecond,
			maxInterval: 250 * time.Millisecond, resetMaxInterval: 300 * time.Second}
		if !hasRetryOn {
			return nil
		}
	}
	rs := &retryState{p: p, c: c, retryOn: p.retryOn, statusCodes: append([]uint32(nil), p.statusCodes...),
		remaining: p.numRetries, next: p.baseInterval, random: x.p.random, clock: x.p.clock}
	if hasRetryOn {
		rs.retryOn |= parseRetryOn(retryOnHdr)
	}
	if rs.retryOn == 0 {
		return nil
	}
	if hasMax {
		if n, err := strconv.ParseUint(strings.TrimSpace(maxRetries), 10, 32); err == nil {
			rs.remaining = uint32(n)
		}
	}
	if hasCodes {
		for _, s := range strings.Split(codes, ",") {
			if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32); err == nil {
				rs.statusCodes = append(rs.statusCodes, uint32(n))
			}
		}
	}
	return rs
}

// onHostAttempted feeds the plugins every host an attempt goes to.
func (rs *retryState) onHostAttempted(h *host) {
	if rs.p.previousHosts {
		rs.tried = append(rs.tried, h)
	}
	if rs.p.previousPriorities > 0 {
		rs.ppTried = append(rs.ppTried, h)
	}
}

func (rs *retryState) isRetry() bool                 { return rs.retried }
func (rs *retryState) hostSelectionMaxAttempts() int { return rs.p.hostSelectionMaxAttempts }

// selectAnother is previous_hosts: reject a host already tried.
func (rs *retryState) selectAnother(h *host) bool {
	for _, t := range rs.tried {
		if t == h {
			return true
		}
	}
	return false
}

// priorityLoad is previous_priorities' determinePriorityLoad: every
// update_frequency attempts the load is recomputed without the priorities
// tried; when none is left with availability, the tried ones are forgotten
// and the load computed over all; if that is still nothing, the original
// load (previous_priorities.cc).
func (rs *retryState) priorityLoad(b *balancer, original []uint32) []uint32 {
	f := rs.p.previousPriorities
	if f == 0 || len(rs.ppTried) < f {
		return original
	}
	if len(rs.ppTried)%f == 0 {
		if len(rs.excluded) < len(b.priorities) {
			rs.excluded = append(rs.excluded, make([]bool, len(b.priorities)-len(rs.excluded))...)
		}
		for _, h := range rs.ppTried {
			rs.excluded[h.priority] = true
		}
		if !rs.adjust(b) {
			return original
		}
	}
	if rs.ppLoad == nil {
		return original
	}
	return rs.ppLoad
}

func (rs *retryState) adjust(b *balancer) bool {
	adjusted := make([]uint32, len(b.priorities))
	avail := func() uint32 {
		var total uint32
		for p := range b.priorities {
			adjusted[p] = 0
			if !rs.excluded[p] {
				adjusted[p] = b.availability(p)
				total += adjusted[p]
			}
		}
		return min(total, 100)
	}
	total := avail()
	if total == 0 {
		for p := range rs.excluded {
			rs.excluded[p] = false
		}
		rs.ppTried = nil
		total = avail()
	}
	if total == 0 {
		return false
	}
	load := make([]uint32, len(adjusted))
	left := uint32(100)
	for left != 0 {
		for p, a := range adjusted {
			d := min(left, a*100/total)
			load[p] += d
			left -= d
		}
	}
	rs.ppLoad = load
	return true
}

// wouldRetryHeaders is wouldRetryFromHeaders for the status and headers
// the upstream filters left.
func (rs *retryState) wouldRetryHeaders(status int, h headerMap) bool {
	if rs.retryOn&retryOnEnvoyRateLimited != 0 {
		v, _ := h.get("x-envoy-ratelimited")
		return v == "true"
	}
	switch {
	case rs.retryOn&retryOn5xx != 0 && status >= 500 && status <= 599,
		rs.retryOn&retryOnGatewayError != 0 && status >= 502 && status <= 504,
		rs.retryOn&retryOnRetriable4xx != 0 && status == 409:
		return true
	}
	if rs.retryOn&retryOnRetriableStatusCodes != 0 {
		for _, c := range rs.statusCodes {
			if int(c) == status {
				return true
			}
		}
	}
	return false
}

// wouldRetryReset is wouldRetryFromReset. started: request bytes went
// upstream.
func (rs *retryState) wouldRetryReset(k resetKind, started bool) bool {
	switch {
	case k == resetConnectFailure && rs.retryOn&retryOnConnectFailure != 0,
		rs.retryOn&retryOnResetBeforeRequest != 0 && !started,
		rs.retryOn&retryOnReset != 0,
		rs.retryOn&(retryOn5xx|retryOnGatewayError) != 0:
		return true
	}
	return false
}

// shouldRetry is RetryStateImpl::shouldRetry: the previous retry's
// circuit-breaker slot is given back, then the retry needs retries left
// and a slot of the cluster's max_retries. It returns the back-off to wait.
func (rs *retryState) shouldRetry(would bool, rateLimited time.Duration) (retryDecision, time.Duration) {
	rs.release()
	switch {
	case !would:
		return retryNo, 0
	case rs.remaining == 0:
		return retryLimitExceeded, 0
	}
	rs.remaining--
	if !rs.c.acquireRetry() {
		return retryOverflow, 0
	}
	rs.holding, rs.retried = true, true
	if rateLimited > 0 {
		// JitteredLowerBoundBackOffStrategy: random(interval, 1.5 × interval).
		ms := uint64(rateLimited.Milliseconds())
		return retryYes, time.Duration(rs.random()%(ms>>1)+ms) * time.Millisecond
	}
	// JitteredExponentialBackOffStrategy: random below the current
	// interval, which doubles up to max_interval.
	cur := rs.next
	if rs.next < rs.p.maxInterval/2 {
		rs.next *= 2
	} else {
		rs.next = rs.p.maxInterval
	}
	return retryYes, time.Duration(rs.random()%uint64(cur.Milliseconds())) * time.Millisecond
}

// release gives back the max_retries slot (resetRetry).
func (rs *retryState) release() {
	if rs != nil && rs.holding {
		rs.holding = false
		rs.c.releaseRetry()
	}
}

// shouldRetryHeaders: a retriable response may bring a rate-limited
// back-off from reset_headers, the first that parses to at most
// max_interval, and only over 1ms (shouldRetryHeaders, parseResetInterval).
func (rs *retryState) shouldRetryHeaders(status int, h headerMap) (retryDecision, time.Duration) {
	would := rs.wouldRetryHeaders(status, h)
	var rl time.Duration
	if would {
		for _, rh := range rs.p.resetHeaders {
			if d, ok := rs.resetInterval(rh, h); ok && d <= rs.p.resetMaxInterval {
				if d > time.Millisecond {
					rl = d
				}
				break
			}
		}
	}
	return rs.shouldRetry(would, rl)
}

// resetInterval is ResetHeaderParserImpl::parseInterval: SECONDS is an
// integer number of seconds; UNIX_TIMESTAMP a time in the future.
func (rs *retryState) resetInterval(rh *routev3.RetryPolicy_ResetHeader, h headerMap) (time.Duration, bool) {
	v, ok := h.get(strings.ToLower(rh.GetName()))
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, false
	}
	if rh.GetFormat() == routev3.RetryPolicy_SECONDS {
		return time.Duration(n) * time.Second, true
	}
	now := uint64(rs.clock.Now().Unix())
	if n <= now {
		return 0, false
	}
	return time.Duration(n-now) * time.Second, true
}

func (rs *retryState) shouldRetryReset(k resetKind, started bool) (retryDecision, time.Duration) {
	return rs.shouldRetry(rs.wouldRetryReset(k, started), 0)
}
