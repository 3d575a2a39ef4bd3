package extproc_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit/memory"
)

// Every exchange ends with one "request done" line, refusals included:
// a missing key (401), an unknown model (404), a body too large (413), a
// body of the wrong type (415), a rate limit (429), each with its error
// type and code; a success with its key prefix, backend, tokens and cost.
func TestRequestLogHasEveryExchange(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	prices, _ := pricing.NewTable([]pricing.Price{{Model: "gpt-4o", Input: 2_500_000_000, Output: 10 * pricing.NanosPerUnit}})
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.RequestLogger, c.Prices = zap.New(core), prices
		c.Limiter = memory.New(memory.Config{})
		c.KeyLimits = authz.Limits{RequestsPerMinute: limit(1)}
	})
	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`
	sent := 0
	send := func(key, contentType, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-Request-Id", strconv.Itoa(sent)) // the lines are written as exchanges end, in any order
		sent++
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		f.gw.Do(t, req)
	}
	send("", "application/json", chatBody)
	send(f.keys["valid"], "application/json", strings.Replace(chatBody, "gpt-4o", "gpt-9", 1))
	send(f.keys["valid"], "application/json", big)
	send(f.keys["limited"], "multipart/form-data; boundary=x", "--x--")
	send(f.keys["valid"], "application/json", chatBody) // the one the key may make this minute
	send(f.keys["valid"], "application/json", chatBody)
	want := []struct {
		status          int64
		errType, code   string
		account, prefix bool
	}{
		{401, "authentication_error", "invalid_api_key", false, false},
		{404, "invalid_request_error", "model_not_found", true, true},
		{413, "invalid_request_error", "request_too_large", true, true},
		{415, "invalid_request_error", "unsupported_media_type", true, true},
		{200, "", "", true, true},
		{429, "rate_limit_error", "rate_limit_exceeded", true, true},
	}
	waitFor(t, func() bool { return logs.FilterMessage("request done").Len() >= len(want) }) // written after each answer
	all := logs.FilterMessage("request done").All()
	if len(all) != len(want) {
		t.Fatalf("%d request lines, want %d: %+v", len(all), len(want), all)
	}
	lines := make([]map[string]any, len(want)) // by the order of sending
	for _, l := range all {
		m := l.ContextMap()
		i, err := strconv.Atoi(fmt.Sprint(m["client_request_id"]))
		if err != nil || i < 0 || i >= len(lines) || lines[i] != nil {
			t.Fatalf("a line for request %v: %v", m["client_request_id"], m)
		}
		lines[i] = m
	}
	for i, w := range want {
		m := lines[i]
		if m["status"] != w.status || m["endpoint"] != "chat.completions" || m["request_id"] == nil {
			t.Errorf("line %d: %v", i, m)
		}
		if w.errType != "" && (m["error_type"] != w.errType || m["error_code"] != w.code) {
			t.Errorf("line %d: error %v %v, want %s %s", i, m["error_type"], m["error_code"], w.errType, w.code)
		}
		if (m["account_id"] != nil) != w.account || (m["key_prefix"] != nil) != w.prefix {
			t.Errorf("line %d: account %v, key prefix %v", i, m["account_id"], m["key_prefix"])
		}
		for k, v := range m {
			if s, ok := v.(string); ok && (strings.Contains(s, f.keys["valid"]) || strings.Contains(s, providerKey)) {
				t.Errorf("line %d: %s holds a secret", i, k)
			}
		}
	}
	ok := lines[4]
	if ok["backend"] != "main" || ok["prompt_tokens"] != int64(8) || ok["completion_tokens"] != int64(377) ||
		ok["cost"] != "0.00379" || ok["currency"] != "USD" || ok["model"] != "gpt-4o" || ok["error_type"] != nil {
		t.Errorf("the success's line: %v", ok)
	}
}

// With sampling, only a share of successes is logged; refusals always.
func TestRequestLogSamplesSuccesses(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.RequestLogger, c.RequestLogSample = zap.New(core), 1e-12
	})
	for range 5 {
		f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
	}
	f.gw.Post(t, "/v1/chat/completions", f.keys["disabled"], chatBody)
	waitFor(t, func() bool { return logs.FilterMessage("request done").Len() >= 1 })
	lines := logs.FilterMessage("request done").All()
	if len(lines) != 1 || lines[0].ContextMap()["status"] != int64(403) {
		t.Errorf("lines = %+v, want the refusal's alone", lines)
	}
}
