package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/sqlite"
)

// wireUsage is the usage object of an OpenAI answer.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// tally sums what clients were told, per kind of request.
type tally struct {
	mu sync.Mutex
	by map[string]*ledger.UsageTotals
}

func (t *tally) add(kind string, u wireUsage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.by[kind]
	s.Requests++
	s.PromptTokens += u.PromptTokens
	s.CompletionTokens += u.CompletionTokens
	s.TotalTokens += u.TotalTokens
	s.CachedTokens += u.PromptTokensDetails.CachedTokens
	s.ReasoningTokens += u.CompletionTokensDetails.ReasoningTokens
}

// The ledger's acceptance test: 10,000 requests from concurrent clients
// through `modelgate dev` — completions, streams read to the end, streams
// the client cancels after the first chunk, and provider errors — leave
// exactly 10,000 usage records once dev has shut down, whose sums are what
// the clients were told and, for the cancelled streams, what the gateway
// counted in its metrics.
func TestLedgerKeepsEveryRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 requests")
	}
	const total, workers = 10_000, 32
	ctx := context.Background()
	dataDir := t.TempDir()
	var logs syncBuffer
	a, stop := launchDev(t, func(string) string { return "" }, &logs, "--data-dir", dataDir)
	store, err := sqlite.Open(ctx, filepath.Join(dataDir, "modelgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// One account per kind of request, so that each one's sums can be
	// checked on their own.
	kinds := []string{"plain", "streamed", "cancelled", "failed"}
	keys, accounts := map[string]string{}, map[string]string{}
	sent := &tally{by: map[string]*ledger.UsageTotals{}}
	for _, k := range kinds {
		acct, err := store.CreateAccount(ctx, "ledger-"+k)
		if err != nil {
			t.Fatal(err)
		}
		if keys[k], _, err = authz.CreateKey(ctx, store, acct.ID, k, nil); err != nil {
			t.Fatal(err)
		}
		accounts[k] = acct.ID
		sent.by[k] = &ledger.UsageTotals{}
	}
	kindOf := func(i int) string { // half plain, a fifth streamed, a quarter cancelled, the rest failed
		switch n := i % 20; {
		case n < 10:
			return "plain"
		case n < 14:
			return "streamed"
		case n < 19:
			return "cancelled"
		}
		return "failed"
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < total && !t.Failed(); i = int(next.Add(1)) - 1 {
				kind := kindOf(i)
				u, err := ledgerRequest(hc, a.Gateway, keys[kind], kind)
				if err != nil {
					t.Errorf("request %d (%s): %v", i, kind, err)
					return
				}
				sent.add(kind, u)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d requests in %v", total, time.Since(start))

	// Cancelled streams finish in the gateway after their clients have
	// gone: wait until every exchange has queued its record, so that the
	// token metrics are final, then shut down, which flushes the ledger.
	m := waitMetrics(t, a.Admin, func(m metrics) bool { return m.sum("modelgate_ledger_records_queued_total") >= total })
	if d := m.sum("modelgate_ledger_records_dropped_total"); d != 0 {
		t.Errorf("%v records dropped", d)
	}
	counted := ledger.UsageTotals{PromptTokens: int64(m.sum("modelgate_extproc_tokens_total", `type="input"`)),
		CompletionTokens: int64(m.sum("modelgate_extproc_tokens_total", `type="output"`))}
	secrets := providerCredentials(a)
	for k, v := range keys {
		secrets[k+" client key"] = v
	}
	recorded := time.Since(start)
	hc.CloseIdleConnections()
	stop()
	t.Logf("%d requests recorded after %v, flushed at shutdown after %v", total, recorded, time.Since(start))

	all, err := store.UsageReport(ctx, ledger.UsageQuery{})
	if err != nil || len(all) != 1 || all[0].Requests != total {
		t.Fatalf("UsageReport = %+v, %v; want %d records", all, err, total)
	}
	if got := (ledger.UsageTotals{PromptTokens: all[0].PromptTokens, CompletionTokens: all[0].CompletionTokens}); got != counted {
		t.Errorf("ledger tokens %+v, gateway metrics %+v", got, counted)
	}
	for _, k := range kinds {
		got, err := store.UsageSince(ctx, accounts[k], time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		want := *sent.by[k]
		want.UnknownCost = want.Requests // the config has no prices
		if k == "failed" {
			want.Failed = want.Requests // every one an error
		}
		if k == "cancelled" {
			checkCancelledRows(t, openLedger(t, filepath.Join(dataDir, "modelgate.db")), accounts[k], want.Requests, *sent.by["streamed"])
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: ledger totals (-sent +recorded):\n%s", k, diff)
		}
	}
	checkNoKeyMaterial(t, logs.String(), secrets)
}

// checkCancelledRows: every stream its client left midway is charged,
// and not as a success. Each stream's usage arrives in its last chunk, so
// a stream counts the provider's usage in full (the gateway read the whole
// stream before the cancel reached it) or an estimate from its prompt and
// the text streamed so far; either way its status is 499, unless the whole
// answer, its end included, went through before the cancel reached Envoy:
// then it was a complete success, 200 with the provider's usage. The
// mock sends that chunk 300ms after the first, so nearly every cancel
// lands midway on an idle machine; on a loaded one many streams finish
// before their cancel reaches the gateway, so the test asks only that some
// cancels landed midway (were estimated): how many depends on speed.
func checkCancelledRows(t *testing.T, db *sql.DB, account string, requests int64, streamed ledger.UsageTotals) {
	t.Helper()
	one := streamed.TotalTokens / streamed.Requests
	rows, err := db.Query(`SELECT status, total_tokens, estimated FROM usage WHERE account_id = ?`, account)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var n, full int64
	for rows.Next() {
		var r ledgerRow
		if err := rows.Scan(&r.Status, &r.Tokens, &r.Estimated); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case r.Status == 200 && !r.Estimated && r.Tokens == one: // the answer ended before the cancel
			full++
		case r.Status != 499 || r.Tokens <= 0:
			t.Errorf("cancelled stream recorded %+v: want status 499 and tokens charged", r)
		case !r.Estimated && r.Tokens != one:
			t.Errorf("cancelled stream recorded %+v unestimated: want the whole stream's %d tokens", r, one)
		case !r.Estimated:
			full++
		}
	}
	if n != requests {
		t.Errorf("%d records of %d cancelled streams", n, requests)
	}
	t.Logf("%d of %d cancelled streams were read to their usage chunk before the cancel; the rest charged estimates", full, requests)
	if full == requests {
		t.Errorf("all %d cancelled streams ran to their end: no cancel landed midway", requests)
	}
}

// ledgerRequest sends one request of a kind and returns the usage the
// client was told (none for cancelled and failed ones).
func ledgerRequest(hc *http.Client, base, key, kind string) (wireUsage, error) {
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]`
	switch kind {
	case "streamed":
		body += `,"stream":true,"stream_options":{"include_usage":true}}`
	case "cancelled": // a stream whose usage comes 300ms after its first chunk
		body = strings.Replace(body, "gpt-4o-mini", "mock-slow", 1) + `,"stream":true,"stream_options":{"include_usage":true}}`
	case "failed":
		body = strings.Replace(body, "gpt-4o-mini", "mock-error-400", 1) + "}"
	default:
		body += "}"
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return wireUsage{}, err
	}
	defer resp.Body.Close()
	if want := map[bool]int{true: 400, false: 200}[kind == "failed"]; resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		return wireUsage{}, fmt.Errorf("status %d, want %d: %s", resp.StatusCode, want, b)
	}
	var u wireUsage
	switch kind {
	case "plain":
		var c struct{ Usage wireUsage }
		err = json.NewDecoder(resp.Body).Decode(&c)
		u = c.Usage
	case "streamed":
		u, err = streamUsage(resp.Body)
	case "cancelled":
		_, err = bufio.NewReader(resp.Body).ReadString('\n') // the first chunk, then gone
		cancel()
	default:
		_, err = io.Copy(io.Discard, resp.Body)
	}
	return u, err
}

// streamUsage reads a stream to [DONE] and returns its usage chunk's usage.
func streamUsage(r io.Reader) (wireUsage, error) {
	var u wireUsage
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
		case data == "[DONE]":
			done = true
		case strings.Contains(data, `"usage":{`):
			var c struct{ Usage wireUsage }
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				return u, err
			}
			u = c.Usage
		}
	}
	if !done || u.TotalTokens == 0 {
		return u, fmt.Errorf("stream ended without usage and [DONE] (err %v)", sc.Err())
	}
	return u, sc.Err()
}

// metrics is a scrape of /metrics, in the text format.
type metrics []string

// sum adds the samples of a metric whose labels contain every filter.
func (m metrics) sum(name string, filters ...string) float64 {
	total := 0.0
	for _, line := range m {
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		matches := true
		for _, f := range filters {
			matches = matches && strings.Contains(series, f)
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil && matches {
			total += v
		}
	}
	return total
}

func scrape(t *testing.T, admin string) metrics {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return metrics(strings.Split(string(b), "\n"))
}

func waitMetrics(t *testing.T, admin string, cond func(metrics) bool) metrics {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := scrape(t, admin)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never met the condition; last scrape:\n%s", strings.Join(m, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkNoKeyMaterial fails if logs hold any of the secrets, or a whole
// key of the gateway's format.
func checkNoKeyMaterial(t *testing.T, logs string, secrets map[string]string) {
	t.Helper()
	if logs == "" {
		t.Error("no logs to check")
	}
	for what, s := range secrets {
		if s != "" && strings.Contains(logs, s) {
			t.Errorf("the logs hold %s", what)
		}
	}
	// A visible prefix (12 characters) may be logged, a whole key never.
	if k := wholeKey.FindString(logs); k != "" {
		t.Errorf("the logs hold what looks like a whole key, starting %s", authz.VisiblePrefix(k))
	}
}

// wholeKey matches a generated key, KeyPrefix and 43 base64url characters.
var wholeKey = regexp.MustCompile(regexp.QuoteMeta(authz.KeyPrefix) + `[A-Za-z0-9_-]{43}`)

// providerCredentials returns the credentials the gateway sent the mock
// provider: its API key and the access tokens minted for Vertex AI.
func providerCredentials(a devAddrs) map[string]string {
	out := map[string]string{}
	for _, r := range a.Mock.Requests() {
		for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
			if v := strings.TrimPrefix(r.Header.Get(h), "Bearer "); v != "" {
				out["provider credential in "+h+" "+authz.VisiblePrefix(v)] = v
			}
		}
	}
	return out
}

// A full dev run with a debug-level logger — requests of every outcome,
// a rejected key and shutdown — logs no key material: no client key
// (valid or not), provider credential or secret from the environment.
func TestLogsHoldNoKeyMaterial(t *testing.T) {
	var logs syncBuffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logs), zapcore.DebugLevel))
	secrets := map[string]string{}
	var mu sync.Mutex
	getenv := func(name string) string { // a secret for every variable that may hold one
		if !strings.Contains(name, "KEY") && !strings.Contains(name, "TOKEN") && !strings.Contains(name, "SECRET") && !strings.Contains(name, "URL") || name == "MODELGATE_DEV_API_KEY" {
			return ""
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := secrets[name]; !ok {
			v, _ := authz.GenerateKey()
			secrets[name] = "env-secret-" + v
		}
		return secrets[name]
	}
	var a devAddrs
	d := &devStack{log: log, e: env{getenv: getenv, stdout: io.Discard, stderr: &logs, ready: func(x devAddrs) { a = x }}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.start(ctx, "", "127.0.0.1:0", "127.0.0.1:0", t.TempDir()); err != nil {
		d.close()
		t.Fatal(err)
	}
	wrongKey, _ := authz.GenerateKey()
	wrongAdmin, _ := authz.GenerateKey()
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, r := range []struct{ path, key, body string }{
		{"/models", a.APIKey, ""},
		{"/models", wrongKey, ""},
		{"/chat/completions", wrongKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`},
		{"/chat/completions", a.APIKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`},
		{"/chat/completions", a.APIKey, `{"model":"mock-error-400","messages":[{"role":"user","content":"Hello!"}]}`},
		{"/chat/completions", a.APIKey, `{"model":"mock-truncated","stream":true,"messages":[{"role":"user","content":"Hello!"}]}`},
		{"/chat/completions", a.APIKey, `{"model":"vertex-claude","stream":true,"messages":[{"role":"user","content":"Hello!"}]}`},
		{"/chat/completions", a.APIKey, `{"model":"nope","messages":[{"role":"user","content":"Hello!"}]}`},
		{"/embeddings", a.APIKey, `{"model":"text-embedding-3-small","input":"Hello!"}`},
		{"/responses", a.APIKey, `{"model":"claude-sonnet","input":"Hello!"}`},
	} {
		method := map[bool]string{true: "GET", false: "POST"}[r.body == ""]
		req, _ := http.NewRequest(method, a.Gateway+r.path, strings.NewReader(r.body))
		req.Header.Set("Authorization", "Bearer "+r.key)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the logs matter
			resp.Body.Close()
		}
	}
	cancelled := `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello!"}]}`
	if _, err := ledgerRequest(hc, a.Gateway, a.APIKey, "cancelled"); err != nil {
		t.Errorf("cancelled stream %s: %v", cancelled, err)
	}
	// The admin API: a key made, used and revoked, and a wrong token.
	adminCall := func(token, method, path, body string) []byte {
		_, b := send(t, method, a.Admin+path, token, "application/json", body)
		return b
	}
	var acct struct{ ID string }
	json.Unmarshal(adminCall(a.AdminToken, "POST", "/admin/v1/accounts", `{"name":"logs"}`), &acct) //nolint:errcheck // checked below
	var made struct {
		Secret string
		Key    struct{ ID string }
	}
	json.Unmarshal(adminCall(a.AdminToken, "POST", "/admin/v1/accounts/"+acct.ID+"/keys", `{"name":"k"}`), &made) //nolint:errcheck // checked below
	if !strings.HasPrefix(made.Secret, authz.KeyPrefix) {
		t.Errorf("no key made through the admin API (account %q)", acct.ID)
	}
	if _, err := ledgerRequest(hc, a.Gateway, made.Secret, "plain"); err != nil {
		t.Errorf("using the key made through the admin API: %v", err)
	}
	adminCall(a.AdminToken, "POST", "/admin/v1/keys/"+made.Key.ID+"/revoke", "")
	adminCall(wrongAdmin, "GET", "/admin/v1/accounts", "")
	creds := providerCredentials(a)
	cancel()
	d.close()
	log.Sync() //nolint:errcheck // a buffer
	if len(creds) == 0 {
		t.Error("no provider credentials seen")
	}
	creds["the dev key"], creds["a rejected key"], creds["a rejected admin token"] = a.APIKey, wrongKey, wrongAdmin
	creds["the admin token"], creds["a key made through the admin API"] = a.AdminToken, made.Secret
	for name, v := range secrets {
		creds["$"+name] = v
	}
	out := logs.String()
	if !strings.Contains(out, `"level":"debug"`) || !strings.Contains(out, `"request done"`) {
		t.Errorf("want debug and request logs, got:\n%s", out)
	}
	checkNoKeyMaterial(t, out, creds)
}
