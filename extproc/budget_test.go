package extproc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
)

// budgetFixture prices gpt-4o (its recorded JSON answer, 8 prompt and 377
// completion tokens, costs 0.00379) and counts budgets in memory.
func budgetFixture(t *testing.T, opts ...func(*extproc.Config)) (*fixture, *memory.Spender) {
	t.Helper()
	prices, err := pricing.NewTable([]pricing.Price{
		{Model: "gpt-4o", Input: 2_500_000_000, Output: 10 * pricing.NanosPerUnit},
	})
	if err != nil {
		t.Fatal(err)
	}
	sp := memory.NewSpender()
	f := newFixture(t, extproctest.Config{}, append([]func(*extproc.Config){func(c *extproc.Config) {
		c.Prices, c.Spender, c.Currency = prices, sp, "EUR"
	}}, opts...)...)
	return f, sp
}

func setAccountBudget(t *testing.T, f *fixture, a authz.Account, b *authz.Budget) {
	t.Helper()
	a, err := f.store.AccountByID(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	a.Budget = b
	if err := f.store.UpdateAccount(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func spent(t *testing.T, sp ratelimit.Spender, b ratelimit.Budget) int64 {
	t.Helper()
	got, err := sp.Spent(context.Background(), []ratelimit.Budget{b}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return got[0]
}

// An account with a monthly budget of 0.004 gets two requests (0.00379 and a stream)
// (the first reserves more than the budget, and is admitted on an empty
// one; the second sees only what the first really cost), then OpenAI's
// 429 insufficient_quota before anything reaches the provider. The
// budget's counter holds exactly what the ledger charged.
func TestBudgetStopsSpending(t *testing.T) {
	f, sp := budgetFixture(t)
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: 4_000_000, Period: authz.PeriodMonth})
	stream := `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}],"stream":true}`
	for i, body := range []string{chatBody, stream} {
		if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body); res.Status != 200 {
			t.Fatalf("request %d: %d %s", i+1, res.Status, res.Body)
		}
	}
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["limited"], chatBody) // the same account
	checkError(t, res, wantError{status: 429, typ: "insufficient_quota", code: "insufficient_quota"})
	renews := time.Date(time.Now().UTC().Year(), time.Now().UTC().Month()+1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	if body := string(res.Body); !strings.Contains(body, "your account's monthly budget of EUR 0.004 is spent") ||
		!strings.Contains(body, "renews at "+renews) {
		t.Errorf("429 body = %s", body)
	}
	if res.Header.Get("X-Should-Retry") != "false" || res.Header.Get("Retry-After") != "" {
		t.Errorf("429 headers = %v: OpenAI's SDKs should not retry", res.Header)
	}
	if len(res.Upstream) != 0 {
		t.Error("a request over budget reached the provider")
	}
	waitRequests(t, f.store, f.account.ID, 3)
	totals, err := f.store.UsageSince(context.Background(), f.account.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	b := ratelimit.Budget{Key: "account:" + f.account.ID, Max: 4_000_000, Renewal: ratelimit.Monthly}
	if got := spent(t, sp, b); got != int64(totals.Cost) || got <= 4_000_000 || totals.UnknownCost != 0 {
		t.Errorf("budget counter %d, ledger %v (%d unpriced): want equal, past the budget", got, totals.Cost, totals.UnknownCost)
	}
	// Another account is not affected.
	other := f.mustAccount(t, "other")
	if res := f.gw.Post(t, "/v1/chat/completions", f.mustKey(t, other, nil), chatBody); res.Status != 200 {
		t.Errorf("another account: %d %s", res.Status, res.Body)
	}
}

// A key's budget of zero allows it nothing, and other keys of its account
// go on.
func TestBudgetOfZeroAllowsNothing(t *testing.T) {
	f, _ := budgetFixture(t)
	ctx := context.Background()
	k, err := f.store.KeyByHash(ctx, authz.HashKey(f.keys["limited"]))
	if err != nil {
		t.Fatal(err)
	}
	k.Budget = &authz.Budget{Amount: 0, Period: authz.PeriodDay}
	if err := f.store.UpdateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["limited"], chatBody)
	checkError(t, res, wantError{status: 429, typ: "insufficient_quota", code: "insufficient_quota"})
	if !strings.Contains(string(res.Body), "this API key's daily budget is EUR 0, which allows no requests") {
		t.Errorf("429 body = %s", res.Body)
	}
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
		t.Errorf("another key: %d %s", res.Status, res.Body)
	}
}

// A request the rate limits refuse gives its budget reservation back: the
// counter holds only what the admitted request cost.
func TestBudgetReservationReturnedWhenRateLimited(t *testing.T) {
	f, sp := budgetFixture(t, func(c *extproc.Config) {
		c.Limiter = memory.New(memory.Config{})
		c.KeyLimits = authz.Limits{RequestsPerMinute: limit(1)}
	})
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: pricing.NanosPerUnit, Period: authz.PeriodWindow, Window: time.Hour})
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
		t.Fatalf("first request: %d %s", res.Status, res.Body)
	}
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
	checkError(t, res, wantError{status: 429, typ: "rate_limit_error", code: "rate_limit_exceeded"})
	b := ratelimit.Budget{Key: "account:" + f.account.ID, Max: pricing.NanosPerUnit, Renewal: ratelimit.Windowed, Window: time.Hour}
	if got, want := spent(t, sp, b), int64(8*2500+377*10_000); got != want {
		t.Errorf("budget counter %d after one admitted request, want its cost %d", got, want)
	}
}

// A limit of zero allows nothing, and tells OpenAI's SDKs not to retry.
func TestLimitOfZeroAllowsNothing(t *testing.T) {
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Limiter = memory.New(memory.Config{})
	})
	a, _ := f.store.AccountByID(context.Background(), f.account.ID)
	a.Limits = authz.Limits{TokensPerMinute: limit(0)}
	if err := f.store.UpdateAccount(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
	checkError(t, res, wantError{status: 429, typ: "rate_limit_error", code: "rate_limit_exceeded"})
	if !strings.Contains(string(res.Body), "tokens per min (TPM): Limit 0") || res.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("429 = %v %s", res.Header, res.Body)
	}
	if len(res.Upstream) != 0 {
		t.Error("the request reached the provider")
	}
}

// A budget with alerts logs and counts the first time its spending
// reaches 80 % and 100 % in a period, and only then.
func TestBudgetAlerts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := extproc.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	f, _ := budgetFixture(t, func(c *extproc.Config) { c.Metrics, c.Logger = m, zap.New(core) })
	// 0.00379 a request: 76 % of 0.005 after one, past 100 % after two.
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: 5_000_000, Period: authz.PeriodDay, Alerts: true})
	alerts := func() map[string]float64 {
		out := map[string]float64{}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "modelgate_extproc_budget_alerts_total" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				var subject, percent string
				for _, l := range mt.GetLabel() {
					switch l.GetName() {
					case "subject":
						subject = l.GetValue()
					case "percent":
						percent = l.GetValue()
					}
				}
				out[subject+" "+percent] = mt.GetCounter().GetValue()
			}
		}
		return out
	}
	post := func() {
		t.Helper()
		if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 200 {
			t.Fatalf("%d %s", res.Status, res.Body)
		}
	}
	post()
	if got := alerts(); len(got) != 0 {
		t.Errorf("at 76 %%: alerts %v", got)
	}
	post()
	if got := alerts(); got["account 80"] != 1 || got["account 100"] != 1 || len(got) != 2 {
		t.Errorf("past 100 %%: alerts %v, want one of 80 and one of 100", got)
	}
	lines := logs.FilterMessage("budget alert").All()
	if len(lines) != 2 || lines[0].ContextMap()["subject"] != "account:"+f.account.ID || lines[1].ContextMap()["percent"] != int64(100) ||
		lines[0].ContextMap()["currency"] != "EUR" {
		t.Errorf("alert log lines = %+v", lines)
	}
	// Refused from now on, and no alert again this period.
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody); res.Status != 429 {
		t.Errorf("over budget: %d", res.Status)
	}
	if got := alerts(); got["account 80"] != 1 || got["account 100"] != 1 {
		t.Errorf("after a refusal: alerts %v", got)
	}
}

// mediaFixture is budgetFixture with whisper-1 and dall-e-2 on the mock:
// whisper-1 priced at 0.0001 a second of audio, dall-e-2 by image size
// (0.016 at 256x256, 0.02 at any other size).
func mediaFixture(t *testing.T) (*fixture, *memory.Spender) {
	t.Helper()
	prices, err := pricing.NewTable([]pricing.Price{
		{Model: "whisper-1", AudioSecond: 100_000},
		{Model: "dall-e-2", Images: []pricing.ImagePrice{{Size: "256x256", Each: 16_000_000}, {Each: 20_000_000}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return budgetFixture(t, func(c *extproc.Config) {
		c.Prices = prices
		c.Routing.Models = append(c.Routing.Models,
			routing.Model{ID: "whisper-1", OwnedBy: "openai", Deployments: []routing.Deployment{{Backend: "main", Model: "whisper-1"}}},
			routing.Model{ID: "dall-e-2", OwnedBy: "openai", Deployments: []routing.Deployment{{Backend: "main", Model: "dall-e-2"}}})
	})
}

func ledgerTotals(t *testing.T, f *fixture) ledger.UsageTotals {
	t.Helper()
	totals, err := f.store.UsageSince(context.Background(), f.account.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return totals
}

// A transcription records the seconds of audio the provider reports (the
// recorded whisper-1 answer: duration usage of 7 seconds), priced by the
// second, and the account's budget is charged that price.
func TestLedgerRecordsTranscribedAudio(t *testing.T) {
	f, sp := mediaFixture(t)
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: pricing.NanosPerUnit, Period: authz.PeriodMonth})
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	fw, _ := w.CreateFormFile("file", "speech.wav")
	fw.Write([]byte("RIFF\x24\x00\x00\x00WAVEfmt "))
	w.WriteField("model", "whisper-1")
	w.Close()
	req, _ := http.NewRequest(http.MethodPost, "/v1/audio/transcriptions", &form)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+f.keys["valid"])
	if res := f.gw.Do(t, req); res.Status != 200 {
		t.Fatalf("transcription: %d %s", res.Status, res.Body)
	}
	waitRequests(t, f.store, f.account.ID, 1)
	totals := ledgerTotals(t, f)
	if totals.Audio != 7*time.Second || totals.Images != 0 {
		t.Errorf("ledger audio %v, %d images; want 7s, none", totals.Audio, totals.Images)
	}
	if want := pricing.Nanos(7 * 100_000); totals.Cost != want || totals.UnknownCost != 0 {
		t.Errorf("ledger cost %v (%d unpriced), want 7 s × 0.0001 = %v", totals.Cost, totals.UnknownCost, want)
	}
	b := ratelimit.Budget{Key: "account:" + f.account.ID, Max: pricing.NanosPerUnit, Renewal: ratelimit.Monthly}
	if got := spent(t, sp, b); got != int64(totals.Cost) {
		t.Errorf("budget counter %d, want the ledger's cost %d", got, totals.Cost)
	}
}

// An image generation records the images the client got, priced at the
// requested size's price.
func TestLedgerRecordsGeneratedImages(t *testing.T) {
	f, sp := mediaFixture(t)
	setAccountBudget(t, f, f.account, &authz.Budget{Amount: pricing.NanosPerUnit, Period: authz.PeriodMonth})
	res := f.gw.Post(t, "/v1/images/generations", f.keys["valid"],
		`{"model":"dall-e-2","prompt":"A lighthouse","n":2,"size":"256x256","response_format":"b64_json"}`)
	if res.Status != 200 {
		t.Fatalf("images: %d %s", res.Status, res.Body)
	}
	var answer struct{ Data []json.RawMessage }
	if err := json.Unmarshal(res.Body, &answer); err != nil || len(answer.Data) != 2 {
		t.Fatalf("answer has %d images (%v), want 2", len(answer.Data), err)
	}
	waitRequests(t, f.store, f.account.ID, 1)
	totals := ledgerTotals(t, f)
	if totals.Images != 2 || totals.Audio != 0 {
		t.Errorf("ledger %d images, audio %v; want 2, none", totals.Images, totals.Audio)
	}
	if want := pricing.Nanos(2 * 16_000_000); totals.Cost != want || totals.UnknownCost != 0 {
		t.Errorf("ledger cost %v (%d unpriced), want 2 × 0.016 = %v", totals.Cost, totals.UnknownCost, want)
	}
	b := ratelimit.Budget{Key: "account:" + f.account.ID, Max: pricing.NanosPerUnit, Renewal: ratelimit.Monthly}
	if got := spent(t, sp, b); got != int64(totals.Cost) {
		t.Errorf("budget counter %d, want the ledger's cost %d", got, totals.Cost)
	}
}
