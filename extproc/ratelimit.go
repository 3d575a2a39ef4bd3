package extproc

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

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
