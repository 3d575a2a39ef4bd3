package extproc_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
	"modelgate/authz/sqlite"
	"modelgate/cmd/mockprovider/replay"
	"modelgate/envoy/envoytest"
	"modelgate/envoy/routing"
	"modelgate/envoy/standin"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/testdata"
	"modelgate/translate/api/spec"
)

const providerKey = "provider-secret-key-123"

type fixture struct {
	gw      *extproctest.Gateway
	store   *sqlite.Store
	account authz.Account
	keys    map[string]string // valid, limited, disabled, disabledAccount
}

func newFixture(t *testing.T, cfg extproctest.Config, opts ...func(*extproc.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	f := &fixture{store: store, keys: map[string]string{}}
	f.account = f.mustAccount(t, "acme")
	f.keys["valid"] = f.mustKey(t, f.account, nil)
	f.keys["limited"] = f.mustKey(t, f.account, []string{"gpt-4o"})
	f.keys["disabled"] = f.mustKey(t, f.account, nil)
	other := f.mustAccount(t, "gone")
	f.keys["disabledAccount"] = f.mustKey(t, other, nil)
	k, _ := store.KeyByHash(ctx, authz.HashKey(f.keys["disabled"]))
	store.SetKeyDisabled(ctx, k.ID, true)
	store.SetAccountDisabled(ctx, other.ID, true)

	ecfg := extproc.Config{
		MaxRequestBodyBytes: 64 << 10,
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}, {Name: "evil", Provider: "openai"}},
			Models: []routing.Model{
				{ID: "gpt-4o", OwnedBy: "openai", Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-5-nano"}}},
				{ID: "gpt-4o-mini", OwnedBy: "openai", Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-5-nano"}}},
				{ID: "mock-truncated", OwnedBy: "test", Deployments: []routing.Deployment{{Backend: "main", Model: "mock-truncated"}}},
				{ID: "mock-error-400", OwnedBy: "test", Deployments: []routing.Deployment{{Backend: "main", Model: "mock-error-400"}}},
				{ID: "small-window", OwnedBy: "test", ContextWindow: 300, Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-5-nano"}}},
			}},
		Credentials: map[string]extproc.Credentials{"main": {APIKey: providerKey}, "evil": {APIKey: "evil"}},
		Responses:   store,
	}
	for _, o := range opts {
		o(&ecfg)
	}
	srv, err := extproc.New(ecfg, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		t.Fatal(err)
	}
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Backends == nil { // a test's own upstreams replace the mock
		cfg.Backends = map[string]http.Handler{"main": mock, "evil": mock}
	}
	if cfg.BufferLimitBytes == 0 {
		cfg.BufferLimitBytes = 1 << 20
	}
	f.gw = extproctest.Start(t, srv, cfg)
	return f
}

func (f *fixture) mustAccount(t *testing.T, name string) authz.Account {
	a, err := f.store.CreateAccount(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *fixture) mustKey(t *testing.T, a authz.Account, models []string) string {
	secret, _, err := authz.CreateKey(context.Background(), f.store, a.ID, "", models)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

const chatBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}]}`

type wantError struct {
	status            int
	typ, param, code  string
	nullParam, noCode bool
}

func TestErrors(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`
	tests := []struct {
		name, method, path, key, body string
		want                          wantError
	}{
		{"no key", "POST", "/v1/chat/completions", "", chatBody, wantError{status: 401, typ: "authentication_error", code: "invalid_api_key"}},
		{"bad key", "POST", "/v1/chat/completions", "sk-mg-not-a-real-key-at-all-000000", chatBody, wantError{status: 401, typ: "authentication_error", code: "invalid_api_key"}},
		{"disabled key", "POST", "/v1/chat/completions", "disabled", chatBody, wantError{status: 403, typ: "permission_error", code: "permission_denied"}},
		{"disabled account", "POST", "/v1/chat/completions", "disabledAccount", chatBody, wantError{status: 403, typ: "permission_error", code: "permission_denied"}},
		{"model not allowed", "POST", "/v1/chat/completions", "limited", strings.Replace(chatBody, `"gpt-4o"`, `"gpt-4o-mini"`, 1), wantError{status: 403, typ: "permission_error", param: "model", code: "permission_denied"}},
		{"missing model", "POST", "/v1/chat/completions", "valid", `{"messages":[{"role":"user","content":"x"}]}`, wantError{status: 400, typ: "invalid_request_error", param: "model", code: "missing_required_parameter"}},
		{"unknown model", "POST", "/v1/chat/completions", "valid", strings.Replace(chatBody, `"gpt-4o"`, `"gpt-9"`, 1), wantError{status: 404, typ: "invalid_request_error", param: "model", code: "model_not_found"}},
		{"malformed JSON", "POST", "/v1/chat/completions", "valid", `{"model":`, wantError{status: 400, typ: "invalid_request_error", nullParam: true, noCode: true}},
		{"temperature 3", "POST", "/v1/chat/completions", "valid", strings.Replace(chatBody, `{`, `{"temperature":3,`, 1), wantError{status: 400, typ: "invalid_request_error", param: "temperature", code: "invalid_value"}},
		{"unknown path", "POST", "/v1/nope", "valid", chatBody, wantError{status: 404, typ: "invalid_request_error", code: "unknown_url"}},
		{"body over the limit", "POST", "/v1/chat/completions", "valid", big, wantError{status: 413, typ: "invalid_request_error", code: "request_too_large"}},
		{"multipart body", "POST", "/v1/chat/completions", "valid", "multipart", wantError{status: 415, typ: "invalid_request_error", code: "unsupported_media_type"}},
		{"no body", "POST", "/v1/chat/completions", "valid", "", wantError{status: 400, typ: "invalid_request_error", noCode: true}},
		{"provider error", "POST", "/v1/chat/completions", "valid", strings.Replace(chatBody, `"gpt-4o"`, `"mock-error-400"`, 1), wantError{status: 400, typ: "invalid_request_error", param: "max_tokens", code: "unsupported_parameter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if k, ok := f.keys[key]; ok {
				key = k
			}
			req, _ := http.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.body == "multipart" {
				req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
			}
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			res := f.gw.Do(t, req)
			checkError(t, res, tt.want)
		})
	}
}

func checkError(t *testing.T, res extproctest.Result, want wantError) {
	t.Helper()
	if res.Status != want.status {
		t.Errorf("status = %d, want %d (body %s)", res.Status, want.status, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content-type = %q", ct)
	}
	spec.ValidateT(t, "ErrorResponse", res.Body)
	var body struct {
		Error struct {
			Type  string  `json:"type"`
			Param *string `json:"param"`
			Code  *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil {
		t.Fatalf("body %s: %v", res.Body, err)
	}
	e := body.Error
	if e.Type != want.typ || deref(e.Param) != want.param || deref(e.Code) != want.code {
		t.Errorf("error = {type %q param %q code %q}, want {%q %q %q}: %s", e.Type, deref(e.Param), deref(e.Code), want.typ, want.param, want.code, res.Body)
	}
	if want.param == "" && e.Param != nil || want.code == "" && e.Code != nil {
		t.Errorf("want null param/code: %s", res.Body)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestModelsListsOnlyAllowed(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	for key, want := range map[string]int{"valid": 5, "limited": 1} {
		req, _ := http.NewRequest("GET", "/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+f.keys[key])
		res := f.gw.Do(t, req)
		spec.ValidateT(t, "ListModelsResponse", res.Body)
		var list struct{ Data []struct{ ID string } }
		json.Unmarshal(res.Body, &list)
		if res.Status != 200 || len(list.Data) != want || len(res.Upstream) != 0 {
			t.Errorf("%s key: status %d, %d models, %d upstream calls; want 200, %d, 0: %s", key, res.Status, len(list.Data), len(res.Upstream), want, res.Body)
		}
	}
}

// A client can neither pick the backend with the internal routing header
// nor have its key reach the provider.
func TestClientCannotRouteAndKeyNeverReachesUpstream(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	req, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Authorization", "Bearer "+f.keys["valid"])
	req.Header.Set("X-Modelgate-Backend", "evil")
	req.Header.Set("X-Modelgate-Anything", "1")
	res := f.gw.Do(t, req)
	if res.Status != 200 {
		t.Fatalf("status %d: %s", res.Status, res.Body)
	}
	if len(res.Upstream["evil"]) != 0 || len(res.Upstream["main"]) != 1 {
		t.Fatalf("upstream calls = %v, want one to main and none to evil", res.Upstream)
	}
	got := res.Upstream["main"][0]
	if a := got.Header.Get("Authorization"); a != "Bearer "+providerKey {
		t.Errorf("upstream authorization = %q, want the provider key", a)
	}
	// The client's are stripped; the gateway's own stop at Envoy's route.
	if got.Header.Get("X-Modelgate-Anything") != "" || got.Header.Get("X-Modelgate-Backend") != "" || got.Header.Get("X-Modelgate-Model") != "" {
		t.Errorf("upstream x-modelgate headers = %v", got.Header)
	}
	for name, values := range got.Header {
		for _, v := range values {
			if strings.Contains(v, f.keys["valid"]) {
				t.Errorf("client key reached the upstream in %s", name)
			}
		}
	}
	if strings.Contains(string(got.Body), f.keys["valid"]) || got.Path != "/v1/chat/completions" || !strings.Contains(string(got.Body), `"model":"gpt-5-nano"`) {
		t.Errorf("upstream request = %s %s", got.Path, got.Body)
	}
}

func TestChatRecordsUsageAndMetadata(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	since := time.Now().Add(-time.Minute)
	res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
	spec.ValidateT(t, "CreateChatCompletionResponse", res.Body)
	md := res.Log.Metadata["io.modelgate"]
	if md["prompt_tokens"] != 8.0 || md["completion_tokens"] != 377.0 || md["model"] != "gpt-4o" {
		t.Errorf("dynamic metadata = %v", res.Log.Metadata)
	}
	var totals ledger.UsageTotals
	for range 50 { // the record is written right after the last reply
		totals, _ = f.store.UsageSince(context.Background(), f.account.ID, since)
		if totals.Requests > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if totals.Requests != 1 || totals.TotalTokens != 385 {
		t.Errorf("usage totals = %+v, want 1 request, 385 tokens", totals)
	}
	if totals.UnknownCost != 1 || totals.Cost != 0 {
		t.Errorf("without prices the cost is unknown: %+v", totals)
	}
}

// With a price in effect, the record carries the request's cost: 8
// prompt tokens at 2.50 a million and 377 completion at 10.
func TestChatRecordsCost(t *testing.T) {
	prices, err := pricing.NewTable([]pricing.Price{
		{Model: "gpt-4o", Input: 2_500_000_000, Output: 10 * pricing.NanosPerUnit},
		{Model: "gpt-4o", From: time.Now().Add(time.Hour), Input: 1}, // not yet in effect
	})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) { c.Prices = prices })
	since := time.Now().Add(-time.Minute)
	f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], chatBody)
	var totals ledger.UsageTotals
	for range 50 {
		if totals, _ = f.store.UsageSince(context.Background(), f.account.ID, since); totals.Requests > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := pricing.Nanos(8*2500 + 377*10_000); totals.Cost != want || totals.UnknownCost != 0 {
		t.Errorf("cost %v (unknown %d), want %v", totals.Cost, totals.UnknownCost, want)
	}
}

// Whatever the chunk edges Envoy delivers, the client gets the same bytes:
// the stand-in cuts the recorded upstream stream at random points
// (mid-event, mid-UTF-8 character) and the output must not change.
func TestStreamAnySplitThroughTheGateway(t *testing.T) {
	envoytest.RequireStandin(t, "the stand-in cuts the upstream stream where the test says (standin.WithResponseSplitter)")
	const body = `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}],"stream":true}`
	whole := newFixture(t, extproctest.Config{})
	want := whole.gw.Post(t, "/v1/chat/completions", whole.keys["valid"], body)
	if want.Status != 200 || !strings.HasSuffix(string(want.Body), "data: [DONE]\n\n") {
		t.Fatalf("unsplit: %d %s", want.Status, want.Body)
	}
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", want.Body)
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 99))
		var mu sync.Mutex
		split := func(b []byte) [][]byte {
			mu.Lock()
			defer mu.Unlock()
			var out [][]byte
			for len(b) > 0 {
				n := 1 + r.IntN(min(len(b), 40))
				out = append(out, b[:n])
				b = b[n:]
			}
			return out
		}
		f := newFixture(t, extproctest.Config{Options: []standin.Option{standin.WithResponseSplitter(split)}})
		got := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body)
		if string(got.Body) != string(want.Body) {
			t.Errorf("seed %d: split output differs\nwant %q\ngot  %q", seed, want.Body, got.Body)
		}
	}
}
