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
	redisURL := os.Getenv("MODELGATE_TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("MODELGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping the shared rate limit test")
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
		}
		return ""
	}
	cfgPath := filepath.Join(t.TempDir(), "modelgate.yaml")
	conf := replicaConfig + `
rate_limits:
  store: redis
  redis_url_env: MODELGATE_REPLICA_REDIS
  fail_closed: true
  key: {requests_per_minute: 10}
`
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	replicas := []*replica{startReplica(t, cfgPath, getenv), startReplica(t, cfgPath, getenv)}
	var out strings.Builder
	if err := run(context.Background(), []string{"keys", "create", "--config", cfgPath, "--account", "acme"},
		env{getenv: getenv, stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(out.String())
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
