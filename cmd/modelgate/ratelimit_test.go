package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"modelgate/authz/ledger"
	"modelgate/authz/postgres"
	"modelgate/translate/api/spec"
)

// With 5 requests per minute per key, the sixth request through `modelgate
// dev` is a 429 with OpenAI's body and headers, and its Retry-After is
// right to the second: one second earlier is still refused, then it works.
func TestDevRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a Retry-After of about 12s")
	}
	path := filepath.Join(t.TempDir(), "modelgate.yaml")
	conf := `
rate_limits:
  key: {requests_per_minute: 5}
backends:
  - {name: mock, provider: openai, base_url: "http://127.0.0.1:1"}
models:
  - id: gpt-4o-mini
    deployments: [{backend: mock, model: gpt-4o-mini}]
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()
	chat := func() (*http.Response, error) {
		var raw *http.Response
		_, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini"), option.WithResponseInto(&raw), option.WithMaxRetries(0))
		return raw, err
	}
	for i := range 5 {
		raw, err := chat()
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if got := raw.Header.Get("X-Ratelimit-Remaining-Requests"); got != strconv.Itoa(4-i) {
			t.Errorf("request %d: x-ratelimit-remaining-requests %q", i+1, got)
		}
	}
	refused := time.Now()
	raw, err := chat()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type != "rate_limit_error" || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("sixth request: %v", err)
	}
	spec.ValidateT(t, "ErrorResponse", rec.last())
	for _, h := range []string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"} {
		if raw.Header.Get(h) == "" {
			t.Errorf("the 429 lacks %s: %v", h, raw.Header)
		}
	}
	retry, err := strconv.Atoi(raw.Header.Get("Retry-After"))
	if err != nil || retry < 11 || retry > 12 {
		t.Fatalf("Retry-After = %q, want 12 (60s / 5)", raw.Header.Get("Retry-After"))
	}
	time.Sleep(time.Until(refused.Add(time.Duration(retry-1) * time.Second)))
	if _, err := chat(); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Errorf("a second before Retry-After: %v", err)
	}
	time.Sleep(time.Until(refused.Add(time.Duration(retry) * time.Second)))
	if _, err := chat(); err != nil {
		t.Errorf("at Retry-After: %v", err)
	}
}

// Limits set on an account through the admin API apply at once on this
// replica: one request per minute, then 429.
func TestDevLimitsEditedThroughAdminAPI(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	admin := func(method, path, body string) []byte {
		status, out := a.admin(t, method, "/admin/v1/"+path, body)
		if status != 200 {
			t.Fatalf("%s %s: %d %s", method, path, status, out)
		}
		return out
	}
	var accounts struct{ Data []struct{ ID, Name string } }
	if err := json.Unmarshal(admin("GET", "accounts", ""), &accounts); err != nil {
		t.Fatal(err)
	}
	var dev string
	for _, acct := range accounts.Data {
		if acct.Name == "dev" {
			dev = acct.ID
		}
	}
	c := client(a, a.APIKey, &recorder{})
	ctx := context.Background()
	for range 3 { // no limit yet
		if _, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini")); err != nil {
			t.Fatal(err)
		}
	}
	admin("PATCH", "accounts/"+dev, `{"limits":{"requests_per_minute":1}}`)
	if _, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini")); err != nil {
		t.Fatalf("first request under the new limit: %v", err)
	}
	_, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini"), option.WithMaxRetries(0))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type != "rate_limit_error" {
		t.Errorf("second request: %v", err)
	}
}

// Two gateways on one PostgreSQL and one Redis, 30 concurrent requests
// against a 10-per-minute key limit: exactly 10 are admitted.
func TestReplicasShareRateLimitsThroughRedis(t *testing.T) {
	replicas, key, _ := redisReplicas(t, `
  key: {requests_per_minute: 10}
`)
	statuses := make(chan int, 30)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			status, _ := replicas[i%2].call(t, "POST", "/chat/completions", key, replicaChat)
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[200] != 10 || count[429] != 20 {
		t.Errorf("statuses = %v, want 10 × 200 and 20 × 429", count)
	}
}

// Two gateways on one PostgreSQL and one Redis, waves of 30 concurrent
// requests against an account's monthly budget: the account spends its
// budget, and never more than the budget plus one request's cost; the
// budget's refusals are OpenAI's 429 insufficient_quota.
func TestReplicasHoldBudgetsThroughRedis(t *testing.T) {
	replicas, key, db := redisReplicas(t, `
prices:
  currency: EUR
  models:
    - {model: gpt-4o-mini, input: "1", output: "4"}
`)
	store, err := postgres.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, err := store.AccountByName(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 10_000_000 // EUR 0.01
	if status, body := replicas[0].admin(t, "PATCH", "/admin/v1/accounts/"+acct.ID,
		`{"budget":{"amount":"0.01","period":"month"}}`); status != 200 {
		t.Fatalf("setting the budget: %d %s", status, body)
	}
	// Each request states max_tokens above what the recorded answer uses,
	// so its reservation covers its cost.
	chat := `{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"Hello!"}]}`
	count := map[int]int{}
	for wave := 0; wave < 20; wave++ {
		statuses := make(chan int, 30)
		var wg sync.WaitGroup
		for i := range 30 {
			wg.Go(func() {
				status, body := replicas[i%2].call(t, "POST", "/chat/completions", key, chat)
				if status == 429 && !strings.Contains(string(body), `"insufficient_quota"`) {
					t.Errorf("a 429 that is not the budget's: %s", body)
				}
				statuses <- status
			})
		}
		wg.Wait()
		close(statuses)
		ok := 0
		for s := range statuses {
			count[s]++
			if s == 200 {
				ok++
			}
		}
		if ok == 0 {
			break
		}
	}
	if len(count) != 2 || count[200] == 0 || count[429] == 0 {
		t.Fatalf("statuses = %v: want some served and then budget refusals", count)
	}
	for _, r := range replicas {
		r.stop() // flushing the ledgers
	}
	rows, err := store.UsageReport(context.Background(), ledger.UsageQuery{AccountID: acct.ID, By: ledger.ByModel})
	if err != nil || len(rows) != 1 {
		t.Fatalf("usage: %v %v", rows, err)
	}
	// The ledger records the refusals too, at no cost.
	total := int64(rows[0].Cost)
	if rows[0].UnknownCost != 0 || rows[0].Requests != int64(count[200]+count[429]) {
		t.Fatalf("ledger: %d requests, %d unpriced; statuses %v", rows[0].Requests, rows[0].UnknownCost, count)
	}
	perRequest := total / int64(count[200]) // the recorded answer: every request costs the same
	t.Logf("statuses %v; spent %d of %d nanos, %d a request", count, total, budget, perRequest)
	if total < budget || total > budget+perRequest {
		t.Errorf("the account spent %d against a budget of %d: want at least the budget and at most one request (%d) more", total, budget, perRequest)
	}
}

// redisReplicas starts two gateways on one PostgreSQL schema and one
// Redis (rate limits and budgets there, failing closed), with an admin
// token, the replica config and extra (YAML appended under rate_limits,
// or top-level sections); it returns them, a key of account "acme" and
// the database's URL. It skips without MODELGATE_TEST_REDIS_URL.
func redisReplicas(t *testing.T, extra string) ([]*replica, string, string) {
	t.Helper()
	redisURL := os.Getenv("MODELGATE_TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("MODELGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping a test of replicas sharing Redis")
	}
	db := postgresSchema(t)
	getenv := func(name string) string {
		switch name {
		case "MODELGATE_REPLICA_DB":
			return db
		case "MODELGATE_REPLICA_REDIS":
			return redisURL
		case "MODELGATE_REPLICA_IMAGE_KEY":
			return "an image URL key the replicas share, 32+ characters"
		case "MODELGATE_ADMIN_TOKEN":
			return "an admin token for the replica tests, 32+ characters"
		}
		return ""
	}
	cfgPath := filepath.Join(t.TempDir(), "modelgate.yaml")
	conf := replicaConfig + `
rate_limits:
  store: redis
  redis_url_env: MODELGATE_REPLICA_REDIS
  fail_closed: true` + extra
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	replicas := []*replica{startReplica(t, cfgPath, getenv), startReplica(t, cfgPath, getenv)}
	var out strings.Builder
	if err := run(context.Background(), []string{"keys", "create", "--config", cfgPath, "--account", "acme"},
		env{getenv: getenv, stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	return replicas, strings.TrimSpace(out.String()), db
}
