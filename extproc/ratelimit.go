package extproc

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/ratelimit"
)

// rules are the rate limit rules of a principal: the key's (every key
// gets Config.KeyLimits) and the account's (its own within its group's,
// else Config.AccountLimits). Group limits apply to each account of the
// group, as authz documents. A limit of zero allows nothing: zero is the
// first such limit's Limit (with Max 0), else nil.
func (s *Server) rules(p *authz.Principal) (rules []ratelimit.Rule, zero *ratelimit.Limit) {
	rules, zero = appendRules(nil, "key:"+p.KeyID, s.cfg.KeyLimits)
	rules, z := appendRules(rules, "account:"+p.AccountID, p.Limits.Or(s.cfg.AccountLimits))
	return rules, cmp.Or(zero, z)
}

func appendRules(out []ratelimit.Rule, subject string, l authz.Limits) (_ []ratelimit.Rule, zero *ratelimit.Limit) {
	add := func(v *int64, limit func(int64) ratelimit.Limit) {
		switch {
		case v == nil:
		case *v > 0:
			out = append(out, ratelimit.Rule{Key: subject, Limit: limit(*v)})
		case zero == nil:
			zero = new(limit(0))
		}
	}
	add(l.RequestsPerMinute, ratelimit.RequestsPerMinute)
	add(l.TokensPerMinute, ratelimit.TokensPerMinute)
	add(l.TokensPerDay, ratelimit.TokensPerDay)
	add(l.ConcurrentRequests, ratelimit.ConcurrentRequests)
	return out, zero
}

// reservation is what the request may consume, reserved from its token
// limits at admission: its estimated prompt and the bound on the answer
// the provider is sent (maxOutput), else Config.DefaultOutputTokens for
// endpoints that generate, once for every answer it asks for (n: 128
// answers of 100 tokens may cost 12,800).
func (r *request) reservation(defaultOutput int64) int64 {
	out := r.maxOutput
	if out == 0 && r.endpoint.spec().generates {
		out = defaultOutput
	}
	return max(saturatingAdd(r.prompt, saturatingMul(out, max(r.answers, 1))), 1)
}

// maxReservation bounds a reservation far above any limit an operator
// sets, and far below where int64 arithmetic on it overflows: a bound
// that overflowed to a negative number would reserve nothing.
const maxReservation = 1 << 52

func saturatingMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxReservation/b {
		return maxReservation
	}
	return a * b
}

func saturatingAdd(a, b int64) int64 { return min(max(a, 0)+max(b, 0), maxReservation) }

// admitRate admits the request against its rate limits once it is
// routed, before anything reaches a provider, reserving tokens. A limiter
// failure fails open (logged and counted) unless the config says closed.
func (m *meter) admitRate(ctx context.Context, p *authz.Principal, reserve int64) error {
	if m.s.cfg.Limiter == nil {
		return nil
	}
	rules, zero := m.s.rules(p)
	if zero != nil {
		return errNothingAllowed(*zero)
	}
	if len(rules) == 0 {
		return nil
	}
	m.rules = rules
	d, err := m.s.cfg.Limiter.Admit(ctx, rules, reserve)
	if err != nil {
		m.s.cfg.Metrics.limiterError()
		if m.s.cfg.RateLimitFailClosed {
			m.log.Error("rate limiter failed; refusing (fail closed)", zap.Error(err))
			return errLimiterUnavailable(err)
		}
		m.log.Warn("rate limiter failed; admitting (fail open)", zap.Error(err))
		return nil
	}
	m.limit = &d
	if !d.Allowed {
		return errRateLimited(d)
	}
	m.reserved = reserve
	return nil
}

// settleRate reconciles the reservation with the tokens the exchange
// really used (or their estimate) and frees its concurrency slot, however
// the exchange ended. The charge happens also when admission failed open:
// usage is usage.
func (m *meter) settleRate(ctx context.Context, used int64) {
	if m.rateSettled {
		return
	}
	m.rateSettled = true
	if m.rules == nil || m.limit != nil && !m.limit.Allowed {
		return
	}
	ctx = m.book.context(ctx, m.s.cfg.UsageTimeout)
	if delta := used - m.reserved; delta != 0 {
		if err := m.s.cfg.Limiter.Charge(ctx, m.rules, delta); err != nil {
			m.s.cfg.Metrics.limiterError()
			m.log.Error("charging tokens to rate limits", zap.Int64("tokens", delta), zap.Error(err))
		}
	}
	if m.limit != nil {
		if err := m.s.cfg.Limiter.Release(ctx, m.limit.Lease); err != nil {
			m.log.Error("releasing a concurrency slot", zap.Error(err))
		}
	}
}

// errRateLimited is the 429 of a refused admission, worded as OpenAI's.
func errRateLimited(d ratelimit.Decision) *APIError {
	var st ratelimit.Status
	for _, s := range d.Statuses {
		if !s.Allowed && s.RetryAfter >= st.RetryAfter {
			st = s
		}
	}
	kind, what := limitNames(st.Rule.Limit)
	return &APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
		Message: fmt.Sprintf("Rate limit reached for %s on %s: Limit %d. Please try again in %s.",
			kind, what, st.Rule.Limit.Max, retryString(d.RetryAfter)),
		retryAfter: d.RetryAfter, decision: &d}
}

// limitNames are what a limit counts and its name in OpenAI's messages.
func limitNames(l ratelimit.Limit) (kind, what string) {
	switch {
	case l.Kind == ratelimit.Tokens && l.Window >= 24*time.Hour:
		return "tokens", "tokens per day (TPD)"
	case l.Kind == ratelimit.Tokens:
		return "tokens", "tokens per min (TPM)"
	case l.Kind == ratelimit.Concurrent:
		return "requests", "concurrent requests"
	}
	return "requests", "requests per min (RPM)"
}

// errNothingAllowed is the 429 of a limit set to zero: waiting will not
// help, so OpenAI's SDKs are told not to retry.
func errNothingAllowed(l ratelimit.Limit) *APIError {
	kind, what := limitNames(l)
	return &APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
		Message: fmt.Sprintf("Rate limit reached for %s on %s: Limit 0. This key is allowed none; ask your administrator.",
			kind, what), noRetry: true}
}

// retryString rounds up to what the client should wait.
func retryString(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(max(1, (d+time.Millisecond-1).Milliseconds()), 10) + "ms"
	}
	return (time.Duration(math.Ceil(d.Seconds())) * time.Second).String()
}

func errLimiterUnavailable(cause error) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "rate_limiter_unavailable",
		Message: "The gateway cannot check rate limits right now; please retry.", Cause: cause, retryAfter: time.Second}
}
