package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"modelgate/cmd/mockprovider/replay"
	"modelgate/envoy/envoytest"
	"modelgate/envoy/standin"
	"modelgate/testdata"
	"modelgate/translate/api/spec"
)

// fallbackConfig is the fault config with models with fallback added:
// their first deployment fails a different way each (the fault provider's
// upstream model names, or a port nothing listens on) and their second is
// Anthropic or Bedrock on the mock provider.
func fallbackConfig(t *testing.T, providerURL string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() // nothing listens there once closed
	l.Close()
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: "fault-provider-key"})
	if err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(mock)
	t.Cleanup(ms.Close)
	base := faultConfig(providerURL, "")
	backends, models, ok := strings.Cut(base, "models:\n")
	if !ok {
		t.Fatal("the fault config has no models")
	}
	extra := fmt.Sprintf(`  - {name: dead, provider: openai, base_url: %q, api_key_env: FAULT_PROVIDER_KEY}
  - {name: dead2, provider: openai, base_url: %[1]q, api_key_env: FAULT_PROVIDER_KEY}
  - {name: claude, provider: anthropic, base_url: %q, api_key_env: FAULT_PROVIDER_KEY}
  - {name: nova, provider: bedrock, base_url: %q, api_key_env: FAULT_PROVIDER_KEY}
`, dead, ms.URL, ms.URL)
	claude := "{backend: claude, model: claude-sonnet-4-20250514, priority: 1}"
	var b strings.Builder
	b.WriteString(backends + extra + "models:\n" + models)
	for _, m := range []struct{ id, first, second, fallback string }{
		{"fb-refused", "{backend: dead, model: ok}", claude, "{}"},
		{"fb-500", "{backend: faulty, model: error-500}", claude, "{outlier: {consecutive: 100}}"},
		{"fb-eject", "{backend: faulty, model: held}", claude, "{outlier: {consecutive: 1, interval: 1s, base_ejection: 30s}}"},
		{"fb-cooldown", "{backend: faulty, model: held}", claude, "{outlier: {consecutive: 1, interval: 1s, base_ejection: 1s}}"},
		{"fb-429", "{backend: faulty, model: error-429}", claude, "{outlier: {consecutive: 100}}"},
		{"fb-hang", "{backend: faulty, model: hang-headers}", claude, "{outlier: {consecutive: 100}}"},
		{"fb-midstream", "{backend: faulty, model: reset-stream}", claude, "{}"},
		{"fb-endstream", "{backend: faulty, model: end-stream}", claude, "{}"},
		{"fb-stall", "{backend: faulty, model: hang-stream}", claude, "{}"},
		{"fb-midbody", "{backend: faulty, model: reset-body}", claude, "{}"},
		{"fb-tools", "{backend: dead, model: ok}", "{backend: claude, model: mock-tools, priority: 1}", "{}"},
		{"fb-all-down", "{backend: dead, model: ok}", "{backend: dead2, model: ok, priority: 1}", "{outlier: {consecutive: 1}}"},
		{"fb-all-fail", "{backend: dead, model: ok}", "{backend: faulty, model: error-429, priority: 1}", "{max_retry_after: 1s}"},
		{"fb-bedrock", "{backend: dead, model: ok}", `{backend: nova, model: "us.amazon.nova-micro-v1:0", priority: 1}`, "{}"},
	} {
		fmt.Fprintf(&b, "  - {id: %s, deployments: [%s, %s], fallback: %s}\n", m.id, m.first, m.second, m.fallback)
	}
	return b.String()
}

// The fallbacks through `modelgate serve` behind the Envoy stand-in: each
// failure of the first deployment before it answers moves the request to
// the second, whose answer (Anthropic's or Bedrock's) reaches the client
// in OpenAI's format, JSON and streams, naming the deployment.
func TestFallbackServe(t *testing.T) {
	p := newFaultProvider(t)
	checkFallbacks(t, p, serveConfigGateway(t, fallbackConfig(t, p.URL)))
}

// The same through `modelgate dev`, whose stand-in runs the same
// bootstrap.
func TestFallbackDev(t *testing.T) {
	p := newFaultProvider(t)
	checkFallbacks(t, p, devConfigGateway(t, fallbackConfig(t, p.URL)))
}

func checkFallbacks(t *testing.T, p *faultProvider, g faultGateway) {
	// The first deployment's upstream model on the fault provider, which
	// must have been tried; "" for a port nothing listens on.
	primary := map[string]string{"fb-500": faultError500, "fb-429": faultError429, "fb-hang": faultHangHeaders}
	for _, model := range []string{"fb-refused", "fb-500", "fb-429", "fb-hang", "fb-bedrock"} {
		t.Run(model, func(t *testing.T) {
			before := p.count(primary[model])
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var raw *http.Response
			c := openai.NewClient(option.WithBaseURL(g.url), option.WithAPIKey(g.key), option.WithMaxRetries(0))
			resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatalf("%v", err)
			}
			want := "claude"
			if model == "fb-bedrock" {
				want = "nova"
			}
			if got := raw.Header.Get("x-modelgate-deployment"); got != want || resp.Choices[0].Message.Content == "" {
				t.Errorf("deployment %q, content %q; want %s's answer", got, resp.Choices[0].Message.Content, want)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", []byte(resp.RawJSON()))
			if resp.Usage.TotalTokens == 0 {
				t.Errorf("usage %+v", resp.Usage)
			}
			if f := primary[model]; f != "" && p.count(f) == before {
				t.Errorf("the first deployment (%s) was never tried", f)
			}
			stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
			var text strings.Builder
			var usage int64
			for stream.Next() {
				ch := stream.Current()
				spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(ch.RawJSON()))
				for _, c := range ch.Choices {
					text.WriteString(c.Delta.Content)
				}
				usage += ch.Usage.TotalTokens
			}
			if err := stream.Err(); err != nil || text.Len() == 0 || usage == 0 {
				t.Errorf("stream: %v, text %q, usage %d", err, text.String(), usage)
			}
		})
	}
}

// A stream whose deployment fails after its first byte reached the client
// is not retried (Envoy never retries once the answer began): the client
// gets the start, then the failure, never the second deployment's answer.
// A provider that resets the connection, or goes silent for stream_idle,
// gets the client's connection reset, as on a model without fallback:
// Envoy cannot add to an answer after its upstream broke it, so no error
// event can follow, and the SDK raises a connection error. The ledger
// keeps what it keeps without fallback: 499 for the reset (the gateway
// cannot tell it from a client that left), 504 for the silence, estimated.
func TestFallbackNotAfterFirstByte(t *testing.T) {
	p, g, c := serveFallbackGateway(t)
	for _, f := range []struct {
		name, fallback, direct, upstream string
		ledger                           int
	}{
		{"reset", "fb-midstream", faultResetStream, faultResetStream, 499},
		{"silence", "fb-stall", faultHangStream, faultHangStream, 504},
	} {
		t.Run(f.name, func(t *testing.T) {
			rows := map[string]ledgerRow{}
			for _, model := range []string{f.fallback, f.direct} {
				select { // nothing left from an earlier request
				case <-p.proceed:
				default:
				}
				before := p.count(f.upstream)
				id := fmt.Sprintf("after-first-byte-%s-%d", model, time.Now().UnixNano())
				r := sdkStream(t, c, model, id, func() { p.proceed <- struct{}{} }) // the client saw the start: let the provider reset
				var se *ssestream.StreamError
				switch {
				case r.err == nil:
					t.Errorf("%s: the stream ended cleanly after the provider broke it; text %q", model, r.text)
				case errors.As(r.err, &se):
					t.Errorf("%s: an error event (%s) after the provider broke the stream: Envoy cannot send one", model, se.Event.Data)
				}
				for _, e := range sseData(r.body) {
					if e == "[DONE]" || strings.HasPrefix(e, `{"error"`) {
						t.Errorf("%s: event %s in a stream the provider broke", model, e)
					}
				}
				// The first deployment streamed "Hel" (and "lo, wor" before a
				// reset); the second deployment's answer (about Paris) must
				// not follow.
				if got := r.text; !strings.HasPrefix(got, "Hel") || !strings.HasPrefix("Hello, wor", got) {
					t.Errorf("%s: the client got %q: want the first deployment's start only, no retry's content", model, got)
				}
				if n := p.count(f.upstream) - before; n != 1 {
					t.Errorf("%s: the provider got %d requests, want 1: no retry", model, n)
				}
				if model == f.fallback && r.deployment != "faulty" {
					t.Errorf("%s: answered by %q, want the first deployment", model, r.deployment)
				}
				row, ok := g.row(t, id, faultSlack)
				if !ok {
					t.Fatalf("%s: no ledger record", model)
				}
				rows[model] = row
				g.waitSlot(t, id)
			}
			fb, direct := rows[f.fallback], rows[f.direct]
			if fb.Status != f.ledger || !fb.Estimated || fb.Tokens == 0 || fb.Status != direct.Status || fb.Estimated != direct.Estimated {
				t.Errorf("ledger: %+v with fallback, %+v without; want status %d, estimated, on both", fb, direct, f.ledger)
			}
		})
	}
}

// A JSON answer that breaks off midway is not retried either: Envoy
// retries on an attempt's response headers, and those had come. Envoy
// still holds the buffered answer's head, so the client gets its 502, as
// without fallback, and the ledger the same record.
func TestFallbackJSONBrokenOff(t *testing.T) {
	p, g, c := serveFallbackGateway(t)
	rows := map[string]ledgerRow{}
	for _, model := range []string{"fb-midbody", faultResetBody} {
		before := p.count(faultResetBody)
		id := fmt.Sprintf("broken-off-%s-%d", model, time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}, option.WithHeader("X-Request-Id", id))
		cancel()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Type != "server_error" {
			t.Errorf("%s: %v, want a 502 server_error", model, err)
		}
		if n := p.count(faultResetBody) - before; n != 1 {
			t.Errorf("%s: the provider got %d requests, want 1: no retry", model, n)
		}
		row, ok := g.row(t, id, faultSlack)
		if !ok {
			t.Fatalf("%s: no ledger record", model)
		}
		rows[model] = row
		g.waitSlot(t, id)
	}
	if fb, direct := rows["fb-midbody"], rows[faultResetBody]; fb.Status != 502 || !fb.Estimated || fb.Status != direct.Status || fb.Estimated != direct.Estimated {
		t.Errorf("ledger: %+v with fallback, %+v without; want status 502, estimated, on both", fb, direct)
	}
}

// A stream whose provider ends it cleanly but early (the body ends without
// a finish_reason or [DONE]) ends with exactly one OpenAI error event,
// which the SDK raises, on a fallback model as on any: the stream had
// begun, so Envoy does not retry it on the next deployment. The ledger
// keeps the same record on both: the client's status (200, its head went
// out), the prompt and the streamed text estimated.
func TestFallbackStreamEndsEarly(t *testing.T) {
	for name, start := range map[string]func(*testing.T, string) faultGateway{
		"serve": func(t *testing.T, cfg string) faultGateway { return serveConfigGateway(t, cfg) },
		"dev":   devConfigGateway,
	} {
		t.Run(name, func(t *testing.T) {
			p := newFaultProvider(t)
			g := start(t, fallbackConfig(t, p.URL))
			c := openai.NewClient(option.WithBaseURL(g.url), option.WithAPIKey(g.key), option.WithMaxRetries(0))
			rows := map[string]ledgerRow{}
			for _, model := range []string{"fb-endstream", faultEndStream} {
				before := p.count(faultEndStream)
				id := fmt.Sprintf("ended-early-%s-%s-%d", name, model, time.Now().UnixNano())
				r := sdkStream(t, c, model, id, nil)
				var se *ssestream.StreamError
				if !errors.As(r.err, &se) {
					t.Errorf("%s: stream error %v (%T), want the gateway's error event raised by the SDK", model, r.err, r.err)
				} else if e := errorEventType(se.Event.Data); e != "server_error" {
					t.Errorf("%s: the error event %s, want type server_error", model, se.Event.Data)
				}
				if r.bodyErr != nil {
					t.Errorf("%s: reading the body: %v, want it to end cleanly", model, r.bodyErr)
				}
				// Exactly one error event, last, after the first deployment's
				// text only: no [DONE], no retry's content.
				streamEndedWithError("Hello, wor")(t, faultResult{status: 200, body: r.body})
				if r.text != "Hello, wor" {
					t.Errorf("%s: the SDK read %q, want the first deployment's %q", model, r.text, "Hello, wor")
				}
				if n := p.count(faultEndStream) - before; n != 1 {
					t.Errorf("%s: the provider got %d requests, want 1: no retry", model, n)
				}
				if model == "fb-endstream" && r.deployment != "faulty" {
					t.Errorf("%s: answered by %q, want the first deployment", model, r.deployment)
				}
				row, ok := g.row(t, id, faultSlack)
				if !ok {
					t.Fatalf("%s: no ledger record", model)
				}
				rows[model] = row
				g.waitSlot(t, id)
			}
			if fb, direct := rows["fb-endstream"], rows[faultEndStream]; fb != direct || fb.Status != 200 || !fb.Estimated || fb.Tokens == 0 {
				t.Errorf("ledger: %+v with fallback, %+v without; want the same, status 200 with tokens estimated", fb, direct)
			}
		})
	}
}

// sdkStreamResult is what the official client saw of one streamed chat
// request: its text, the stream's error, the deployment that answered,
// the body as it came, and the error of reading the rest of the body
// once the SDK stopped (nil: it ended cleanly).
type sdkStreamResult struct {
	text, deployment string
	err, bodyErr     error
	body             []byte
}

// drainedBody is a response body that, when the SDK closes it (which it
// does at the first error event), reads the rest first, keeping the error
// that ended it.
type drainedBody struct {
	io.Reader
	body   io.Closer
	err    *error
	closed bool
}

func (b *drainedBody) Close() error {
	if !b.closed {
		b.closed = true
		_, *b.err = io.Copy(io.Discard, b.Reader)
	}
	return b.body.Close()
}

// sdkStream streams a chat request for model, sent with x-request-id id,
// through the official client; started, if any, runs once the first chunk
// arrived.
func sdkStream(t *testing.T, c openai.Client, model, id string, started func()) sdkStreamResult {
	t.Helper()
	var r sdkStreamResult
	var raw bytes.Buffer
	tee := option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err == nil {
			r.deployment = resp.Header.Get("x-modelgate-deployment")
			resp.Body = &drainedBody{Reader: io.TeeReader(resp.Body, &raw), body: resp.Body, err: &r.bodyErr}
		}
		return resp, err
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}},
		option.WithHeader("X-Request-Id", id), tee)
	var text strings.Builder
	for stream.Next() {
		spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(stream.Current().RawJSON()))
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
		if started != nil {
			started()
			started = nil
		}
	}
	r.err = stream.Err()
	stream.Close()
	r.text, r.body = text.String(), raw.Bytes()
	return r
}

// A deployment that fails is set aside after outlier.consecutive failures:
// requests go straight to the next priority, and after base_ejection it is
// tried again. The stand-in's outlier clock is the test's.
func TestFallbackEjection(t *testing.T) {
	envoytest.RequireStandin(t, "the outlier detector's clock is the test's (standin.WithClock)")
	clock := &manualClock{now: time.Unix(1_800_000_000, 0)}
	p, c := serveFallback(t, standin.WithClock(clock))
	ask := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var raw *http.Response
		if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fb-eject",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}, option.WithResponseInto(&raw)); err != nil {
			t.Fatal(err)
		}
		return raw.Header.Get("x-modelgate-deployment")
	}
	// held answers only once released: until then its requests hang, and
	// the per-try timeout (2s) fails them over, an outlier failure each.
	if got := ask(); got != "claude" || p.count(faultHeld) != 1 {
		t.Fatalf("first request: answered by %q after %d tries of the primary", got, p.count(faultHeld))
	}
	if got := ask(); got != "claude" || p.count(faultHeld) != 1 {
		t.Fatalf("while ejected: answered by %q, primary tried %d times; want it set aside", got, p.count(faultHeld))
	}
	close(p.release)
	clock.advance(31 * time.Second)
	if got := ask(); got != "faulty" || p.count(faultHeld) != 2 {
		t.Fatalf("after base_ejection: answered by %q, primary tried %d times; want it back", got, p.count(faultHeld))
	}
}

// manualClock is a Clock the test moves; its waits are over at once.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// One of two deployments of equal weight fails every request during an
// outage while clients keep a steady rate: Envoy retries the failures on
// the other and sets the failing one aside after outlier.consecutive (3)
// failures. Before that a retry may land on the failing deployment again
// (Envoy re-picks a previous host at most host_selection_retry_max_attempts
// times) and fail; once it is set aside, no client sees an error, and the
// ledger has one successful record per answered request. By default a
// short run; MODELGATE_TEST_SOAK=1 runs the 30 s outage at 50 requests a
// second.
func TestFallbackUnderOutage(t *testing.T) {
	duration, rate := 4*time.Second, 20
	if os.Getenv("MODELGATE_TEST_SOAK") != "" {
		duration, rate = 30*time.Second, 50
	}
	var down atomic.Bool
	down.Store(true)
	var failed, ejectedAt atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			if failed.Add(1) == 3 {
				ejectedAt.Store(time.Now().UnixNano()) // the third failure ejects it, inline
			}
			http.Error(w, `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`, http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, 200, chatJSON())
	}))
	defer flaky.Close()
	p := newFaultProvider(t)
	cfg := faultConfig(p.URL, "")
	backends, models, _ := strings.Cut(cfg, "models:\n")
	cfg = backends + fmt.Sprintf("  - {name: flaky, provider: openai, base_url: %q, api_key_env: FAULT_PROVIDER_KEY}\n", flaky.URL) +
		"models:\n" + models +
		"  - {id: fb-weighted, deployments: [{backend: faulty, model: ok}, {backend: flaky, model: ok}], fallback: {outlier: {consecutive: 3, base_ejection: 60s}}}\n"
	cfg = strings.Replace(cfg, "concurrent_requests: 1,", "concurrent_requests: 1000,", 1)
	g := serveConfigGateway(t, cfg)
	c := openai.NewClient(option.WithBaseURL(g.url), option.WithAPIKey(g.key), option.WithMaxRetries(0))
	n := int(duration.Seconds()) * rate
	ids := make([]string, n)
	errs := make(chan error, n)
	var early atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		<-tick.C
		wg.Add(1)
		sent := time.Now().UnixNano()
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var raw *http.Response
			_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fb-weighted",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}, option.WithResponseInto(&raw))
			if err != nil {
				if at := ejectedAt.Load(); at != 0 && sent > at {
					errs <- fmt.Errorf("request %d, sent after the failing deployment was set aside: %w", i, err)
				} else {
					early.Add(1)
				}
				return
			}
			ids[i] = raw.Header.Get("x-request-id")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if e := early.Load(); e > 3 {
		t.Errorf("%d clients got an error before the failing deployment was set aside; it fails only 3 times before", e)
	}
	if f := failed.Load(); f == 0 || f > int64(n)/2 {
		t.Errorf("the failing deployment got %d of %d requests: want some, and fewer once it was set aside", f, n)
	}
	for i, id := range ids {
		if id == "" {
			continue
		}
		if r, ok := g.row(t, id, 10*time.Second); !ok || r.Status != 200 || r.Tokens == 0 {
			t.Fatalf("request %d (%s): ledger %+v, found %v", i, id, r, ok)
		}
	}
	var rows, attempts int
	if err := g.ledger.QueryRow(`SELECT count(*) FROM usage WHERE attempt = 0`).Scan(&rows); err != nil || rows != n {
		t.Errorf("ledger has %d request records for %d requests (%v)", rows, n, err)
	}
	// Each 503 of the failing deployment is a failed attempt's record.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := g.ledger.QueryRow(`SELECT count(*) FROM usage WHERE attempt > 0 AND backend = 'flaky' AND status = 503 AND total_tokens = 0`).Scan(&attempts)
		if err == nil && int64(attempts) == failed.Load() || time.Now().After(deadline) {
			if int64(attempts) != failed.Load() {
				t.Errorf("ledger has %d failed attempts of the failing deployment; it failed %d times (%v)", attempts, failed.Load(), err)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d requests at %d/s: the failing deployment answered %d of them with 503; %d clients saw an error before it was set aside, none after", n, rate, failed.Load(), early.Load())
}

// When every deployment fails, the client gets the last one's error in
// OpenAI's shape: here a 429 with its Retry-After.
func TestFallbackAllFail(t *testing.T) {
	p := newFaultProvider(t)
	g := serveConfigGateway(t, fallbackConfig(t, p.URL))
	req, _ := http.NewRequest("POST", g.url+"/chat/completions", strings.NewReader(`{"model":"fb-all-fail","messages":[{"role":"user","content":"Hello!"}]}`))
	req.Header.Set("Authorization", "Bearer "+g.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || resp.Header.Get("x-modelgate-deployment") != "faulty" {
		t.Errorf("%d, Retry-After %q, deployment %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("x-modelgate-deployment"), body)
	}
	spec.ValidateT(t, "ErrorResponse", body)
	if p.count(faultError429) == 0 {
		t.Error("the second deployment was never tried")
	}
}

// With every deployment set aside, Envoy has none left to try: the client
// gets an OpenAI-shaped 503.
func TestFallbackAllSetAside(t *testing.T) {
	p := newFaultProvider(t)
	g := serveConfigGateway(t, fallbackConfig(t, p.URL))
	for i := range 2 {
		req, _ := http.NewRequest("POST", g.url+"/chat/completions", strings.NewReader(`{"model":"fb-all-down","messages":[{"role":"user","content":"Hello!"}]}`))
		req.Header.Set("Authorization", "Bearer "+g.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("request %d: %d %s", i, resp.StatusCode, body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "could not be reached") {
			t.Errorf("request %d: %d: %s", i, resp.StatusCode, body)
		}
		spec.ValidateT(t, "ErrorResponse", body)
	}
}

// Tool calls survive a fallback across formats: the Anthropic deployment's
// tool_use reaches the client as OpenAI tool calls, JSON and streamed.
func TestFallbackToolCalls(t *testing.T) {
	_, c := serveFallback(t)
	ctx := t.Context()
	params := openai.ChatCompletionNewParams{Model: "fb-tools",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What's the weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_current_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}})}}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", []byte(resp.RawJSON()))
	calls := resp.Choices[0].Message.ToolCalls
	if len(calls) == 0 || calls[0].Function.Name == "" || resp.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("JSON: %s", resp.RawJSON())
	}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(stream.Current().RawJSON()))
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0].Message.ToolCalls
	if len(got) != len(calls) {
		t.Fatalf("%d streamed tool calls, want %d", len(got), len(calls))
	}
	for i := range calls { // the arguments as JSON values: the stream may space them otherwise
		var a, b any
		if got[i].Function.Name != calls[i].Function.Name || json.Unmarshal([]byte(got[i].Function.Arguments), &a) != nil ||
			json.Unmarshal([]byte(calls[i].Function.Arguments), &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("streamed tool call %d: %s(%s), want %s(%s)", i, got[i].Function.Name, got[i].Function.Arguments, calls[i].Function.Name, calls[i].Function.Arguments)
		}
	}
}

// serveFallback runs serve on the fallback config with the fault provider
// and returns both and an official client of the gateway.
func serveFallback(t *testing.T, opts ...standin.Option) (*faultProvider, openai.Client) {
	t.Helper()
	p, _, c := serveFallbackGateway(t, opts...)
	return p, c
}

// serveFallbackGateway is serveFallback that returns the gateway too.
func serveFallbackGateway(t *testing.T, opts ...standin.Option) (*faultProvider, faultGateway, openai.Client) {
	t.Helper()
	p := newFaultProvider(t)
	g := serveConfigGateway(t, fallbackConfig(t, p.URL), opts...)
	return p, g, openai.NewClient(option.WithBaseURL(g.url), option.WithAPIKey(g.key), option.WithMaxRetries(0))
}

// The same through `modelgate dev`, on real time: after a cool-down of 1s
// (swept every second) the set-aside deployment answers again.
func TestFallbackCooldownDev(t *testing.T) {
	p := newFaultProvider(t)
	g := devConfigGateway(t, fallbackConfig(t, p.URL))
	c := openai.NewClient(option.WithBaseURL(g.url), option.WithAPIKey(g.key), option.WithMaxRetries(0))
	ask := func() string {
		t.Helper()
		var raw *http.Response
		if _, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "fb-cooldown",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}, option.WithResponseInto(&raw)); err != nil {
			t.Fatal(err)
		}
		return raw.Header.Get("x-modelgate-deployment")
	}
	if got := ask(); got != "claude" || p.count(faultHeld) != 1 {
		t.Fatalf("first request: answered by %q after %d tries of the primary", got, p.count(faultHeld))
	}
	close(p.release)
	deadline := time.Now().Add(30 * time.Second) // bounds the wait; the cool-down is 1s
	for got := ask(); got != "faulty"; got = ask() {
		if time.Now().After(deadline) {
			t.Fatalf("the primary never answered again; last answer from %q, primary tried %d times", got, p.count(faultHeld))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
