package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"modelgate/ratelimit"
)

func TestValidate(t *testing.T) {
	rpm := ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(10)}
	tests := []struct {
		name  string
		rules []ratelimit.Rule
		ok    bool
	}{
		{"none", nil, true},
		{"typical", []ratelimit.Rule{
			rpm,
			{Key: "key:k", Limit: ratelimit.Limit{Kind: ratelimit.Requests, Max: 1000, Window: 24 * time.Hour}},
			{Key: "key:k", Limit: ratelimit.TokensPerMinute(1000)},
			{Key: "key:k", Limit: ratelimit.TokensPerDay(1e6)},
			{Key: "key:k", Limit: ratelimit.ConcurrentRequests(4)},
			{Key: "account:a", Limit: ratelimit.RequestsPerMinute(10)},
		}, true},
		{"no key", []ratelimit.Rule{{Limit: ratelimit.RequestsPerMinute(1)}}, false},
		{"zero max", []ratelimit.Rule{{Key: "k", Limit: ratelimit.TokensPerDay(0)}}, false},
		{"huge max", []ratelimit.Rule{{Key: "k", Limit: ratelimit.TokensPerDay(1 << 60)}}, false},
		{"negative window", []ratelimit.Rule{{Key: "k", Limit: ratelimit.Limit{Kind: ratelimit.Concurrent, Max: 1, Window: -1}}}, false},
		{"sub-millisecond window", []ratelimit.Rule{{Key: "k", Limit: ratelimit.Limit{Kind: ratelimit.Tokens, Max: 1, Window: time.Microsecond}}}, false},
		{"unknown kind", []ratelimit.Rule{{Key: "k", Limit: ratelimit.Limit{Kind: 9, Max: 1, Window: time.Second}}}, false},
		{"same counter, other max", []ratelimit.Rule{rpm, {Key: "key:k", Limit: ratelimit.RequestsPerMinute(5)}}, false},
		{"two concurrency caps", []ratelimit.Rule{
			{Key: "k", Limit: ratelimit.ConcurrentRequests(1)},
			{Key: "k", Limit: ratelimit.Limit{Kind: ratelimit.Concurrent, Max: 2, Window: time.Hour}},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ratelimit.Validate(tt.rules)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ratelimit.ErrInvalid)) {
				t.Errorf("Validate(%v) = %v, want ok %v (errors wrap ErrInvalid)", tt.rules, err, tt.ok)
			}
		})
	}
	for _, tt := range []struct {
		name string
		err  error
		ok   bool
	}{
		{"ValidateCharge(-1)", ratelimit.ValidateCharge([]ratelimit.Rule{rpm}, -1), true}, // a refund
		{"ValidateCharge(2^50)", ratelimit.ValidateCharge([]ratelimit.Rule{rpm}, 1<<50), true},
		{"ValidateCharge(2^50+1)", ratelimit.ValidateCharge([]ratelimit.Rule{rpm}, 1<<50+1), false},
		{"ValidateCharge(-2^50-1)", ratelimit.ValidateCharge([]ratelimit.Rule{rpm}, -1<<50-1), false},
		{"ValidateCharge(bad rule)", ratelimit.ValidateCharge([]ratelimit.Rule{{Key: "k"}}, 1), false},
		{"ValidateAdmit(0)", ratelimit.ValidateAdmit([]ratelimit.Rule{rpm}, 0), true},
		{"ValidateAdmit(2^50)", ratelimit.ValidateAdmit([]ratelimit.Rule{rpm}, 1<<50), true},
		{"ValidateAdmit(-1)", ratelimit.ValidateAdmit([]ratelimit.Rule{rpm}, -1), false},
		{"ValidateAdmit(2^50+1)", ratelimit.ValidateAdmit([]ratelimit.Rule{rpm}, 1<<50+1), false},
		{"ValidateAdmit(bad rule)", ratelimit.ValidateAdmit([]ratelimit.Rule{{Key: "k"}}, 1), false},
	} {
		if (tt.err == nil) != tt.ok || (tt.err != nil && !errors.Is(tt.err, ratelimit.ErrInvalid)) {
			t.Errorf("%s = %v, want ok %v (errors wrap ErrInvalid)", tt.name, tt.err, tt.ok)
		}
	}
}

func TestNeed(t *testing.T) {
	tpm := ratelimit.TokensPerMinute(1000)
	for _, tt := range []struct{ reserve, want int64 }{{0, 1}, {1, 1}, {410, 410}, {1000, 1000}, {5000, 1000}} {
		if got := tpm.Need(tt.reserve); got != tt.want {
			t.Errorf("Need(%d) against 1000 = %d, want %d", tt.reserve, got, tt.want)
		}
	}
}

func TestStateKey(t *testing.T) {
	for _, tt := range []struct {
		rule ratelimit.Rule
		want string
	}{
		{ratelimit.Rule{Key: "key:k", Limit: ratelimit.RequestsPerMinute(10)}, "key:k:r:60000"},
		{ratelimit.Rule{Key: "key:k", Limit: ratelimit.TokensPerDay(10)}, "key:k:t:86400000"},
		{ratelimit.Rule{Key: "key:k", Limit: ratelimit.ConcurrentRequests(10)}, "key:k:c"},
	} {
		if got := tt.rule.StateKey(); got != tt.want {
			t.Errorf("StateKey(%v) = %q, want %q", tt.rule, got, tt.want)
		}
	}
}

func TestTightest(t *testing.T) {
	st := func(key string, kind ratelimit.Kind, remaining int64, retry, reset time.Duration) ratelimit.Status {
		return ratelimit.Status{Rule: ratelimit.Rule{Key: key, Limit: ratelimit.Limit{Kind: kind, Max: 100, Window: time.Minute}},
			Remaining: remaining, RetryAfter: retry, Reset: reset}
	}
	d := ratelimit.Decision{Statuses: []ratelimit.Status{
		st("key", ratelimit.Requests, 5, 0, time.Second),
		st("account", ratelimit.Requests, 0, 2*time.Second, 10*time.Second),
		st("group", ratelimit.Requests, 0, 3*time.Second, 5*time.Second),
		st("key", ratelimit.Tokens, 7, 0, time.Second),
		st("account", ratelimit.Tokens, 7, 0, 9*time.Second),
		st("key", ratelimit.Concurrent, 0, time.Second, 0),
	}}
	for _, tt := range []struct {
		kind ratelimit.Kind
		want string
	}{{ratelimit.Requests, "group"}, {ratelimit.Tokens, "account"}, {ratelimit.Concurrent, "key"}} {
		if got, ok := d.Tightest(tt.kind); !ok || got.Rule.Key != tt.want {
			t.Errorf("Tightest(%v) = %+v, %v; want the %s rule", tt.kind, got, ok, tt.want)
		}
	}
	if got, ok := (ratelimit.Decision{}).Tightest(ratelimit.Tokens); ok {
		t.Errorf("Tightest on no statuses = %+v, true; want false", got)
	}
}
