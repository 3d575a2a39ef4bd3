package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // reads the ledger

	"modelgate/cmd/modelgate/wiring"
	"modelgate/envoy"
	"modelgate/envoy/envoytest"
	"modelgate/envoy/standin"
	"modelgate/extproc/config"
	"modelgate/translate/api/spec"
	"modelgate/translate/openai"
)

// The fault suite's timeouts: short, so that each case is bounded, and
// apart, so that the message tells which one fired.
const (
	faultHeadersTimeout = 2 * time.Second
	faultIdleTimeout    = time.Second
	// faultSlack is how much longer than its timeout a case may take on a
	// loaded machine; the timeouts are what is asserted, not speed.
	faultSlack = 20 * time.Second
	// faultClientTimeout bounds the client's wait for any case, the
	// longest allowed (the 40 MB answer's slack: read whole under the
	// race detector it took over 20s on a busy machine); each case's own
	// bound is checked by checkFault.
	faultClientTimeout = faultHeadersTimeout + 2*time.Minute
	// faultEnvoy gives the gateway's own work more than Envoy's default
	// 10s per message: the 40 MB answer's translation, under the race
	// detector on a loaded 2-core machine, can take longer. No fault case
	// is about that timeout.
	faultEnvoy = "envoy: {message_timeout: 120s}\n"
)

// faultGateway is a gateway under test: its client-facing base URL (with
// /v1), a key, and its ledger.
type faultGateway struct {
	url, key string
	ledger   *sql.DB
}

// faultConfig serves every fault behaviour from the scripted provider,
// with one account-wide concurrency slot (a slot an exchange failed to
// free would refuse the next case) and a token budget.
func faultConfig(providerURL, extra string) string {
	return faultConfigLimits(providerURL, extra, "{concurrent_requests: 1, tokens_per_day: 100000000}")
}

// faultConfigLimits is faultConfig with other account limits.
func faultConfigLimits(providerURL, extra, limits string) string {
	var quirks []string
	for name := range openai.CompatibleProviders() {
		quirks = append(quirks, name)
	}
	slices.Sort(quirks)
	var b strings.Builder
	b.WriteString(extra)
	fmt.Fprintf(&b, `
rate_limits:
  account: %s
backends:
  - {name: faulty, provider: openai, base_url: %q, api_key_env: FAULT_PROVIDER_KEY,
     timeouts: {response_headers: %s, stream_idle: %s}}
`, limits, providerURL, faultHeadersTimeout, faultIdleTimeout)
	for _, q := range quirks {
		fmt.Fprintf(&b, "  - {name: quirks-%s, provider: %s, base_url: %q, api_key_env: FAULT_PROVIDER_KEY}\n", q, q, providerURL)
	}
	b.WriteString("models:\n" + faultModels("faulty", quirks))
	return b.String()
}

func faultEnv(name string) string {
	if name == "FAULT_PROVIDER_KEY" {
		return "fault-provider-key"
	}
	return ""
}

// devFaultGateway runs `modelgate dev` on the fault config.
func devFaultGateway(t *testing.T, providerURL, extra string) faultGateway {
	t.Helper()
	return devConfigGateway(t, faultConfig(providerURL, extra))
}

// devConfigGateway runs `modelgate dev` on a config.
func devConfigGateway(t *testing.T, cfgYAML string) faultGateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "modelgate.yaml")
	if err := os.WriteFile(path, []byte(cfgYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	a, _ := launchDev(t, faultEnv, io.Discard, "--config", path, "--data-dir", dir)
	return faultGateway{url: a.Gateway, key: a.APIKey, ledger: openLedger(t, filepath.Join(dir, "modelgate.db"))}
}

// serveFaultGateway runs `modelgate serve` on the fault config behind the
// Envoy stand-in, or the real Envoy MODELGATE_TEST_ENVOY names, running
// the bootstrap `modelgate envoy-config` makes.
func serveFaultGateway(t *testing.T, providerURL, extra string) faultGateway {
	t.Helper()
	return serveConfigGateway(t, faultConfig(providerURL, extra))
}

// serveConfigGateway runs `modelgate serve` on a config (its backends and
// models; the listeners and the store are the test's) behind the Envoy
// stand-in, with back-offs between retries made zero, or behind the real
// Envoy MODELGATE_TEST_ENVOY names, with its own back-offs. A real Envoy
// cannot take opts: with any, the test is skipped under one.
func serveConfigGateway(t *testing.T, cfgYAML string, opts ...standin.Option) faultGateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "modelgate.yaml")
	db := filepath.Join(dir, "serve.db")
	cfgText := "server: {grpc_listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0}\nstorage: {sqlite_path: " + db + "}\n" + cfgYAML
	if err := os.WriteFile(path, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keys", "create", "--config", path, "--account", "faults"},
		env{getenv: faultEnv, stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path}, env{getenv: faultEnv, stdout: &logs, stderr: &logs})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve ended with %v", err)
		}
	})
	grpcAddr := servingAddress(t, &logs)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ec := wiring.EnvoyConfig(cfg)
	ec.Listen, ec.ExtProcAddress = "127.0.0.1:0", grpcAddr
	b, err := envoy.Bootstrap(ec)
	if err != nil {
		t.Fatal(err)
	}
	front := envoytest.Start(t, b,
		envoytest.WithStandinTuning(standin.WithBackOff(func(time.Duration) time.Duration { return 0 })),
		envoytest.WithStandin("the test passes stand-in options to serveConfigGateway", opts...))
	return faultGateway{url: front.URL() + "/v1", key: strings.TrimSpace(out.String()), ledger: openLedger(t, db)}
}

// servingAddress waits for serve's "serving" log line and returns its
// gRPC address.
func servingAddress(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(logs.String(), "\n") {
			var line struct{ Msg, GRPC string }
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "serving" {
				return line.GRPC
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("serve did not start: %s", logs.String())
	return ""
}

func openLedger(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ledgerRow is what the ledger kept of one request.
type ledgerRow struct {
	Status    int
	Tokens    int64
	Estimated bool
}

// row waits for the ledger record of the request sent with x-request-id
// requestID, or answered with it (the gateway's own id), as the ledger
// writes in batches; ok is false if none came.
func (g faultGateway) row(t *testing.T, requestID string, wait time.Duration) (r ledgerRow, ok bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := g.ledger.QueryRow(`SELECT status, total_tokens, estimated FROM usage WHERE (client_request_id = ? OR request_id = ?) AND attempt = 0`,
			requestID, requestID).
			Scan(&r.Status, &r.Tokens, &r.Estimated)
		if err == nil {
			return r, true
		}
		if !errors.Is(err, sql.ErrNoRows) && !strings.Contains(err.Error(), "no such table") {
			t.Fatalf("reading the ledger: %v", err)
		}
		if time.Now().After(deadline) {
			return r, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// faultResult is what a client saw.
type faultResult struct {
	status  int
	header  http.Header
	body    []byte
	readErr error // the body broke off (a reset)
	took    time.Duration
}

// do sends one request with its own request id and reads its answer.
func (g faultGateway) do(t *testing.T, id, path, body string, chunked bool) faultResult {
	t.Helper()
	return g.watch(t, id, path, body, chunked, nil)
}

// stepped sends a request and tells the provider to go on once the client
// has read text.
func (g faultGateway) stepped(t *testing.T, id, path, body, text string, proceed chan<- struct{}) faultResult {
	t.Helper()
	told := false
	return g.watch(t, id, path, body, false, func(got []byte) {
		if !told && bytes.Contains(got, []byte(text)) {
			proceed <- struct{}{}
			told = true
		}
	})
}

// watch sends one request with its own request id and reads its answer,
// showing seen what arrived so far after every read.
func (g faultGateway) watch(t *testing.T, id, path, body string, chunked bool, seen func([]byte)) faultResult {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length: sent chunked
	}
	req, err := http.NewRequest(http.MethodPost, g.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	start := time.Now()
	resp, err := (&http.Client{Timeout: faultClientTimeout}).Do(req)
	if err != nil {
		return faultResult{readErr: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if seen != nil {
			seen(got.Bytes())
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return faultResult{status: resp.StatusCode, header: resp.Header, body: got.Bytes(), readErr: err, took: time.Since(start)}
		}
	}
}

// waitSlot waits until a request is admitted under the account's one
// concurrency slot: an exchange that kept its slot fails the test.
func (g faultGateway) waitSlot(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(faultSlack)
	for i := 0; ; i++ {
		probe := g.do(t, fmt.Sprintf("%s-probe-%d", id, i), "/chat/completions", chatRequest(faultOK, false), false)
		if probe.status == 200 {
			return
		}
		if probe.status != 429 || time.Now().After(deadline) {
			t.Fatalf("the next request got %d %s: the exchange kept its slot", probe.status, probe.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func chatRequest(model string, stream bool) string {
	s := ""
	if stream {
		s = `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return `{"model":"` + model + `","messages":[{"role":"user","content":"Say hello to the fault suite."}]` + s + `}`
}

// faultCase is one fault and everything the suite asserts of it.
type faultCase struct {
	name, model string
	stream      bool
	path, body  string // when not a chat request
	chunked     bool

	stepped    bool   // the provider resets once the client saw the stream begin
	status     int    // the client's; 0 means the stream was reset
	errType    string // the OpenAI error's type, for error statuses
	errCode    string
	mention    string        // text the error message must hold
	minTook    time.Duration // the timeout that must have fired
	slack      time.Duration // how much longer it may take; zero means faultSlack
	ledger     int           // the ledger's status; 0: no record
	estimated  bool
	zeroTokens bool // a provider error: nothing consumed
	check      func(t *testing.T, r faultResult)
}

func faultCases() []faultCase {
	cases := []faultCase{
		{name: "hang before headers", model: faultHangHeaders, status: 504, errType: "server_error", errCode: "timeout",
			mention: "`hang-headers`", minTook: faultHeadersTimeout, ledger: 504, estimated: true},
		{name: "hang before headers, streaming", model: faultHangHeaders, stream: true, status: 504, errType: "server_error",
			errCode: "timeout", mention: "`hang-headers`", minTook: faultIdleTimeout, ledger: 504, estimated: true},
		{name: "hang mid-stream", model: faultHangStream, stream: true, status: 0, minTook: faultIdleTimeout, ledger: 504,
			estimated: true, check: streamStartedWith("Hel")},
		// Envoy answers itself while it holds a buffered answer's head.
		{name: "reset mid-body", model: faultResetBody, status: 502, errType: "server_error", mention: "broke off",
			ledger: 502, estimated: true},
		{name: "reset mid-stream", model: faultResetStream, stream: true, status: 0, ledger: 499, estimated: true,
			stepped: true, check: streamStartedWith("Hel")},
		// A clean but early end of the provider's stream: the translator
		// ends it with an error event, which the client can read.
		{name: "stream ends early", model: faultEndStream, stream: true, status: 200, ledger: 200, estimated: true,
			check: streamEndedWithError("Hello, wor")},
		{name: "empty 200", model: faultEmpty200, status: 502, errType: "server_error", ledger: 502, estimated: true},
		{name: "HTML 200", model: faultHTML200, status: 502, errType: "server_error", ledger: 502, estimated: true},
		{name: "non-JSON 200", model: faultNotJSON200, status: 502, errType: "server_error", ledger: 502, estimated: true},
		{name: "provider 500", model: faultError500, status: 500, errType: "server_error", mention: "processing your request",
			ledger: 500, zeroTokens: true},
		// OpenAI's own 429 says type "requests" or "tokens": kept as sent.
		{name: "provider 429", model: faultError429, status: 429, errType: "requests", errCode: "rate_limit_exceeded",
			mention: "Rate limit reached", ledger: 429, zeroTokens: true, check: func(t *testing.T, r faultResult) {
				if r.header.Get("Retry-After") != "7" {
					t.Errorf("Retry-After %q, want the provider's 7", r.header.Get("Retry-After"))
				}
			}},
		{name: "40 MB embeddings answer", path: "/embeddings", body: bigEmbeddingsRequest(), status: 200, ledger: 200,
			check: checkBigEmbeddings, slack: faultClientTimeout - faultHeadersTimeout}, // its CPU time, not a timeout: the machine's speed
	}
	var quirks []string
	for name := range openai.CompatibleProviders() {
		quirks = append(quirks, name)
	}
	slices.Sort(quirks)
	for _, q := range append([]string{""}, quirks...) {
		model := faultNullChoices
		if q != "" {
			model += "-" + q
		}
		cases = append(cases, faultCase{name: "schema-breaking chunks " + model, model: model, stream: true, status: 200,
			ledger: 200, check: checkRepairedStream})
	}
	return cases
}

func bigEmbeddingsRequest() string {
	inputs := make([]string, bigInputs)
	for i := range inputs {
		inputs[i] = fmt.Sprint(i)
	}
	b, _ := json.Marshal(map[string]any{"model": faultBigEmbeddings, "input": inputs})
	return string(b)
}

// TestFaultsThroughDev drives every fault through `modelgate dev`.
func TestFaultsThroughDev(t *testing.T) {
	p := newFaultProvider(t)
	runFaults(t, devFaultGateway(t, p.URL, faultEnvoy), p)
}

// TestFaultsThroughServe drives every fault through `modelgate serve`
// behind the Envoy stand-in, or a real Envoy (MODELGATE_TEST_ENVOY).
func TestFaultsThroughServe(t *testing.T) {
	p := newFaultProvider(t)
	runFaults(t, serveFaultGateway(t, p.URL, faultEnvoy), p)
}

func runFaults(t *testing.T, g faultGateway, p *faultProvider) {
	for i, c := range faultCases() {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("fault-%d-%d", i, time.Now().UnixNano())
			path, body := "/chat/completions", chatRequest(c.model, c.stream)
			if c.path != "" {
				path, body = c.path, c.body
			}
			var r faultResult
			if c.stepped {
				r = g.stepped(t, id, path, body, "Hel", p.proceed)
			} else {
				r = g.do(t, id, path, body, c.chunked)
			}
			checkFault(t, c, r)
			if c.ledger == 0 {
				if row, ok := g.row(t, id, time.Second); ok {
					t.Errorf("ledger has %+v for a request never routed", row)
				}
			} else {
				row, ok := g.row(t, id, faultSlack)
				switch {
				case !ok:
					t.Errorf("no ledger record")
				case row.Status != c.ledger || row.Estimated != c.estimated:
					t.Errorf("ledger %+v, want status %d estimated %v", row, c.ledger, c.estimated)
				case c.zeroTokens != (row.Tokens == 0):
					t.Errorf("ledger tokens %d, want zero: %v", row.Tokens, c.zeroTokens)
				}
			}
			// The limiter: the one concurrency slot is free again, at once
			// for an answer that ended, or once Envoy's reset of a broken
			// one reached the gateway.
			g.waitSlot(t, id)
		})
	}
}

func checkFault(t *testing.T, c faultCase, r faultResult) {
	t.Helper()
	slack := cmp.Or(c.slack, faultSlack)
	if r.took < c.minTook || r.took > c.minTook+slack {
		t.Errorf("took %v, want the %v timeout (and at most %v more)", r.took, c.minTook, slack)
	}
	if c.status == 0 {
		if r.readErr == nil {
			t.Errorf("got a clean %d %q, want the stream reset", r.status, r.body)
		}
	} else if r.status != c.status || r.readErr != nil {
		t.Fatalf("got %d %q (%v), want %d", r.status, r.body, r.readErr, c.status)
	}
	if c.status >= 400 {
		spec.ValidateT(t, "ErrorResponse", r.body)
		var e struct {
			Error struct {
				Message, Type string
				Code          *string
			}
		}
		json.Unmarshal(r.body, &e) //nolint:errcheck // validated above
		if e.Error.Type != c.errType || c.errCode != "" && (e.Error.Code == nil || *e.Error.Code != c.errCode) {
			t.Errorf("error %s, want type %s code %q", r.body, c.errType, c.errCode)
		}
		if !strings.Contains(e.Error.Message, c.mention) || strings.Contains(e.Error.Message, "127.0.0.1") {
			t.Errorf("message %q: want it to mention %q and never the provider's address", e.Error.Message, c.mention)
		}
	}
	if c.check != nil {
		c.check(t, r)
	}
}

// streamStartedWith: the client saw the stream begin before it broke.
func streamStartedWith(text string) func(*testing.T, faultResult) {
	return func(t *testing.T, r faultResult) {
		if r.status != 200 || !bytes.Contains(r.body, []byte(`"content":"`+text)) {
			t.Errorf("stream %d %q: want it to have begun with %q", r.status, r.body, text)
		}
	}
}

// streamEndedWithError: the stream carried text, then exactly one OpenAI
// error event of type server_error, and nothing after it (no [DONE]).
func streamEndedWithError(text string) func(*testing.T, faultResult) {
	return func(t *testing.T, r faultResult) {
		t.Helper()
		events := sseData(r.body)
		if r.status != 200 || len(events) == 0 {
			t.Fatalf("stream %d %q: want a 200 stream", r.status, r.body)
		}
		var got strings.Builder
		for _, e := range events[:len(events)-1] {
			if e == "[DONE]" || strings.HasPrefix(e, `{"error"`) {
				t.Errorf("event %s before the stream's last: want chunks only, then one error event", e)
				continue
			}
			spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(e))
			var ch struct {
				Choices []struct{ Delta struct{ Content string } }
			}
			json.Unmarshal([]byte(e), &ch) //nolint:errcheck // validated above
			for _, c := range ch.Choices {
				got.WriteString(c.Delta.Content)
			}
		}
		if got.String() != text {
			t.Errorf("the stream carried %q, want %q", got.String(), text)
		}
		last := []byte(events[len(events)-1])
		if errorEventType(last) != "server_error" {
			t.Fatalf("the stream ended with %s, want an error event of type server_error (and no [DONE])", last)
		}
		spec.ValidateT(t, "ErrorResponse", last)
	}
}

// errorEventType is the type of an OpenAI error event's error; "" for
// what is not one.
func errorEventType(data []byte) string {
	var e struct{ Error struct{ Type string } }
	if json.Unmarshal(data, &e) != nil {
		return ""
	}
	return e.Error.Type
}

// sseData is the data of each event of an SSE body, in order.
func sseData(body []byte) []string {
	var events []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	return events
}

// checkRepairedStream: every event is a valid chunk or one error event,
// and the stream ends with [DONE].
func checkRepairedStream(t *testing.T, r faultResult) {
	events := sseData(r.body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream %q: want events ending in [DONE]", r.body)
	}
	for _, e := range events[:len(events)-1] {
		if strings.HasPrefix(e, `{"error"`) {
			spec.ValidateT(t, "ErrorResponse", []byte(e))
			continue
		}
		spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(e))
	}
}

func checkBigEmbeddings(t *testing.T, r faultResult) {
	if len(r.body) < 30<<20 {
		t.Fatalf("answer of %d bytes, want the whole 40 MB", len(r.body))
	}
	var resp struct {
		Data []struct {
			Index     int
			Embedding []float32
		}
	}
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != bigInputs || len(resp.Data[bigInputs-1].Embedding) != bigDims {
		t.Fatalf("%d embeddings, want %d of %d dimensions", len(resp.Data), bigInputs, bigDims)
	}
}

// Envoy's buffer below the gateway's own body limit (Envoy Gateway buffers
// 32 KiB by default): a 64 KiB request, with or without its length, gets
// Envoy's 413 as an OpenAI error, never an empty 500, and leaves no record.
func TestFaultsEnvoyBuffer(t *testing.T) {
	p := newFaultProvider(t)
	big := `{"model":"ok","messages":[{"role":"user","content":"` + strings.Repeat("a", 64<<10) + `"}]}`
	for name, g := range map[string]func(*testing.T, string, string) faultGateway{"dev": devFaultGateway, "serve": serveFaultGateway} {
		t.Run(name, func(t *testing.T) {
			// The 40 MB answer below must not race Envoy's message timeout on
			// a loaded machine under the race detector: this test is about
			// the buffer.
			gw := g(t, p.URL, "envoy: {buffer_limit_bytes: 32768, message_timeout: 10m}\n")
			for _, chunked := range []bool{false, true} {
				c := faultCase{name: "64 KiB request", status: 413, errType: "invalid_request_error", errCode: "request_too_large"}
				id := fmt.Sprintf("buffer-%s-%v-%d", name, chunked, time.Now().UnixNano())
				r := gw.do(t, id, "/chat/completions", big, chunked)
				checkFault(t, c, r)
				if row, ok := gw.row(t, id, time.Second); ok {
					t.Errorf("chunked %v: ledger has %+v for a request never routed", chunked, row)
				}
			}
			// What fits still works, answers larger than the buffer too.
			if r := gw.do(t, "small", "/chat/completions", chatRequest(faultOK, false), false); r.status != 200 {
				t.Errorf("a small request: %d %s", r.status, r.body)
			}
			r := gw.do(t, "big-answer", "/embeddings", bigEmbeddingsRequest(), false)
			if r.status != 200 {
				t.Fatalf("big answer: %d %.200s", r.status, r.body)
			}
			checkBigEmbeddings(t, r)
		})
	}
}

// 20 concurrent requests against 1,000 tokens a minute: each reserves its
// prompt and its max_tokens of 400 at admission, so exactly two fit, and
// the 18 others are refused before any answer came back.
func TestTokenBudgetHolds(t *testing.T) {
	p := newFaultProvider(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "modelgate.yaml")
	if err := os.WriteFile(path, []byte(faultConfigLimits(p.URL, "", "{tokens_per_minute: 1000}")), 0o644); err != nil {
		t.Fatal(err)
	}
	a, _ := launchDev(t, faultEnv, io.Discard, "--config", path, "--data-dir", dir)
	g := faultGateway{url: a.Gateway, key: a.APIKey, ledger: openLedger(t, filepath.Join(dir, "modelgate.db"))}
	body := `{"model":"held","max_tokens":400,"messages":[{"role":"user","content":"Hello!"}]}`
	results := make(chan faultResult, 20)
	for i := range 20 {
		go func() { results <- g.do(t, fmt.Sprintf("budget-%d", i), "/chat/completions", body, false) }()
	}
	var ok, refused int
	for refused < 18 {
		select {
		case r := <-results:
			if r.status != 429 {
				t.Fatalf("an answer (%d %s) came back before the provider was released: over-admitted", r.status, r.body)
			}
			refused++
		case <-time.After(faultSlack):
			t.Fatalf("only %d of 20 requests refused: more than the budget was admitted", refused)
		}
	}
	close(p.release)
	for range 2 {
		if r := <-results; r.status == 200 {
			ok++
		}
	}
	if ok != 2 {
		t.Fatalf("%d admitted requests answered, want 2", ok)
	}
	var n, tokens int64
	for deadline := time.Now().Add(faultSlack); n < 2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		g.ledger.QueryRow(`SELECT COUNT(*), COALESCE(SUM(total_tokens), 0) FROM usage WHERE status = 200`).Scan(&n, &tokens) //nolint:errcheck // polled
	}
	if n != 2 || tokens > 1000 {
		t.Errorf("the ledger has %d answered requests charged %d tokens, want 2 within the budget of 1,000", n, tokens)
	}
}
