package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

func TestAPIGroupsAndAccounts(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		h := newHarness(t, s)
		var g groupJSON
		if st := h.call(t, "POST", "/admin/v1/groups", map[string]any{"name": " team ", "models": []string{"gpt-4o", "gpt-4o-mini"},
			"limits": map[string]any{"requests_per_minute": 60}}, &g); st != http.StatusCreated {
			t.Fatalf("create group: %d", st)
		}
		if g.ID == "" || g.Name != "team" || *g.Limits.RequestsPerMinute != 60 || g.Limits.TokensPerDay != nil {
			t.Errorf("created group = %+v", g)
		}
		var a accountJSON
		if st := h.call(t, "POST", "/admin/v1/accounts", map[string]any{"name": "acme", "group_id": g.ID, "models": []string{"gpt-4o"}}, &a); st != http.StatusCreated {
			t.Fatalf("create account: %d", st)
		}
		if a.GroupID != g.ID || !cmp.Equal(a.Models, []string{"gpt-4o"}) || a.Disabled {
			t.Errorf("created account = %+v", a)
		}
		var got accountJSON
		h.call(t, "GET", "/admin/v1/accounts/"+a.ID, nil, &got)
		if diff := cmp.Diff(a, got, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
			t.Errorf("GET account (-created +got):\n%s", diff)
		}

		// PATCH changes only what it names.
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, map[string]any{"disabled": true, "limits": map[string]any{"tokens_per_day": 1000}}, &got)
		if !got.Disabled || got.GroupID != g.ID || got.Name != "acme" || *got.Limits.TokensPerDay != 1000 {
			t.Errorf("patched account = %+v", got)
		}
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, map[string]any{"group_id": "", "disabled": false}, &got)
		if got.GroupID != "" || got.Disabled {
			t.Errorf("account out of its group = %+v", got)
		}
		h.call(t, "PATCH", "/admin/v1/groups/"+g.ID, map[string]any{"name": "team-2"}, &g)
		if g.Name != "team-2" || len(g.Models) != 2 {
			t.Errorf("patched group = %+v", g)
		}

		var groups list[groupJSON]
		var accounts list[accountJSON]
		h.call(t, "GET", "/admin/v1/groups", nil, &groups)
		h.call(t, "GET", "/admin/v1/accounts", nil, &accounts)
		if len(groups.Data) != 1 || len(accounts.Data) != 1 || accounts.Data[0].Name != "acme" {
			t.Errorf("lists = %+v %+v", groups, accounts)
		}
	})
}

func TestAPIErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		h := newHarness(t, s)
		h.call(t, "POST", "/admin/v1/accounts", map[string]any{"name": "acme"}, nil)
		var k authz.Key
		a, _ := s.AccountByName(context.Background(), "acme")
		_, k, _ = authz.CreateKey(context.Background(), s, a.ID, "", nil)
		s.RevokeKey(context.Background(), k.ID)
		for _, tc := range []struct {
			name, method, path string
			body               any
			status             int
			typ, message       string
		}{
			{"duplicate name", "POST", "/admin/v1/accounts", map[string]any{"name": "acme"}, 409, "conflict_error", "already exists"},
			{"unknown field", "POST", "/admin/v1/accounts", map[string]any{"nmae": "x"}, 400, "invalid_request_error", "unknown field"},
			{"not JSON", "POST", "/admin/v1/groups", "{", 400, "invalid_request_error", "JSON"},
			{"two values", "POST", "/admin/v1/groups", `{"name":"a"} {}`, 400, "invalid_request_error", "more than one"},
			{"no name", "POST", "/admin/v1/groups", map[string]any{"models": []string{}}, 400, "invalid_request_error", "name is required"},
			{"control characters", "POST", "/admin/v1/accounts", map[string]any{"name": "a\x00b"}, 400, "invalid_request_error", "printable"},
			{"unknown model", "POST", "/admin/v1/groups", map[string]any{"name": "g", "models": []string{"gpt-5"}}, 400, "invalid_request_error", `"gpt-5" is not configured`},
			{"negative limit", "POST", "/admin/v1/groups", map[string]any{"name": "g", "limits": map[string]any{"tokens_per_day": -1}}, 400, "invalid_request_error", "negative"},
			{"unknown group", "PATCH", "/admin/v1/accounts/" + a.ID, map[string]any{"group_id": "grp_none"}, 400, "invalid_request_error", "no group"},
			{"unknown account", "GET", "/admin/v1/accounts/acct_none", nil, 404, "not_found_error", "acct_none"},
			{"key of unknown account", "POST", "/admin/v1/accounts/acct_none/keys", map[string]any{}, 404, "not_found_error", "acct_none"},
			{"unknown key", "PATCH", "/admin/v1/keys/key_none", map[string]any{"disabled": true}, 404, "not_found_error", "key_none"},
			{"revoke unknown key", "POST", "/admin/v1/keys/key_none/revoke", nil, 404, "not_found_error", "key_none"},
			{"change revoked key", "PATCH", "/admin/v1/keys/" + k.ID, map[string]any{"disabled": false}, 409, "conflict_error", "revoked"},
			{"bad usage date", "GET", "/admin/v1/usage?from=yesterday", nil, 400, "invalid_request_error", "from"},
			{"bad grouping", "GET", "/admin/v1/usage?by=week", nil, 400, "invalid_request_error", "week"},
			{"no route", "DELETE", "/admin/v1/accounts/" + a.ID, nil, 404, "not_found_error", "no admin API route"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var e errorBody
				if st := h.call(t, tc.method, tc.path, tc.body, &e); st != tc.status {
					t.Errorf("status %d, want %d (%+v)", st, tc.status, e)
				}
				if e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.message) {
					t.Errorf("error = %+v, want type %s and a message with %q", e.Error, tc.typ, tc.message)
				}
			})
		}
	})
}

// A key's whole life through the API, checked against a real
// Authenticator whose cache would hide every change for hours were it not
// invalidated.
func TestAPIKeyLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		h := newHarness(t, s)
		ctx := context.Background()
		var a accountJSON
		h.call(t, "POST", "/admin/v1/accounts", map[string]any{"name": "acme"}, &a)
		var created createdKey
		if st := h.call(t, "POST", "/admin/v1/accounts/"+a.ID+"/keys", map[string]any{"name": "ci", "models": []string{"gpt-4o-mini"}}, &created); st != 201 {
			t.Fatalf("create key: %d", st)
		}
		secret, k := created.Secret, created.Key
		if !strings.HasPrefix(secret, authz.KeyPrefix) || !strings.HasPrefix(secret, k.Prefix) || k.State != "active" || k.AccountID != a.ID {
			t.Fatalf("created = %+v", created)
		}
		p, err := h.auth.Authenticate(ctx, secret)
		if err != nil || !p.Allows("gpt-4o-mini") || p.Allows("gpt-4o") {
			t.Fatalf("Authenticate = %+v, %v", p, err)
		}

		// The secret is never shown again.
		for _, path := range []string{"/admin/v1/keys/" + k.ID, "/admin/v1/accounts/" + a.ID + "/keys"} {
			var raw map[string]any
			h.call(t, "GET", path, nil, &raw)
			if b := mustJSON(t, raw); strings.Contains(b, secret) || strings.Contains(b, "hash") || !strings.Contains(b, k.Prefix) {
				t.Errorf("GET %s shows the secret or hash, or not the prefix: %s", path, b)
			}
		}

		patch := func(body map[string]any) keyJSON {
			t.Helper()
			var out keyJSON
			if st := h.call(t, "PATCH", "/admin/v1/keys/"+k.ID, body, &out); st != 200 {
				t.Fatalf("PATCH %v: %d", body, st)
			}
			return out
		}
		steps := []struct {
			name    string
			body    map[string]any
			state   string
			wantErr error
		}{
			{"disable", map[string]any{"disabled": true}, "disabled", authz.ErrDisabled},
			{"enable", map[string]any{"disabled": false}, "active", nil},
			{"expire", map[string]any{"expires_at": time.Now().Add(-time.Minute)}, "expired", authz.ErrUnauthenticated},
			{"clear expiry", map[string]any{"expires_at": nil}, "active", nil},
			{"future expiry", map[string]any{"expires_at": time.Now().Add(time.Hour)}, "active", nil},
		}
		for _, step := range steps {
			got := patch(step.body)
			_, err := h.auth.Authenticate(ctx, secret)
			if got.State != step.state || !errors.Is(err, step.wantErr) {
				t.Errorf("%s: state %q, Authenticate %v; want %q, %v", step.name, got.State, err, step.state, step.wantErr)
			}
		}
		if got := patch(map[string]any{"models": []string{"gpt-4o"}, "name": "renamed"}); got.Name != "renamed" || got.ExpiresAt == nil {
			t.Errorf("after models = %+v", got)
		}
		if p, _ := h.auth.Authenticate(ctx, secret); p == nil || p.Allows("gpt-4o-mini") || !p.Allows("gpt-4o") {
			t.Errorf("models after PATCH: %+v", p)
		}

		// The account's state counts too.
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, map[string]any{"disabled": true}, nil)
		if _, err := h.auth.Authenticate(ctx, secret); !errors.Is(err, authz.ErrDisabled) {
			t.Errorf("key of a disabled account: %v", err)
		}
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, map[string]any{"disabled": false}, nil)

		var revoked keyJSON
		if st := h.call(t, "POST", "/admin/v1/keys/"+k.ID+"/revoke", nil, &revoked); st != 200 || revoked.State != "revoked" || revoked.RevokedAt == nil {
			t.Errorf("revoke: %d %+v", st, revoked)
		}
		if _, err := h.auth.Authenticate(ctx, secret); !errors.Is(err, authz.ErrUnauthenticated) {
			t.Errorf("revoked key: %v", err)
		}
	})
}

func TestAPIUsage(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		h := newHarness(t, s)
		ctx := context.Background()
		a, _ := s.CreateAccount(ctx, "acme")
		b, _ := s.CreateAccount(ctx, "beta")
		_, ka, _ := authz.CreateKey(ctx, s, a.ID, "", nil)
		_, kb, _ := authz.CreateKey(ctx, s, b.ID, "", nil)
		day1 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
		day2 := day1.AddDate(0, 0, 1)
		// gpt-4o has a price, 1,000 nanos a token; gpt-4o-mini has none.
		rec := func(k authz.Key, model string, at time.Time, tokens int64) ledger.UsageRecord {
			return ledger.UsageRecord{RequestID: model + at.String() + k.ID, KeyID: k.ID, AccountID: k.AccountID, Endpoint: "chat",
				Model: model, Status: 200, PromptTokens: tokens / 2, CompletionTokens: tokens - tokens/2, TotalTokens: tokens, At: at,
				Cost: pricing.Nanos(1000 * tokens), CostKnown: model == "gpt-4o"}
		}
		if err := s.AppendUsageBatch(ctx, []ledger.UsageRecord{
			rec(ka, "gpt-4o", day1, 10), rec(ka, "gpt-4o", day1.Add(time.Hour), 20), rec(ka, "gpt-4o-mini", day2, 5),
			rec(kb, "gpt-4o", day2, 100),
		}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			query string
			want  []usageJSON
		}{
			{"", []usageJSON{{Requests: 4, PromptTokens: 67, CompletionTokens: 68, TotalTokens: 135, Cost: "0.00013", UnpricedRequests: 1}}},
			{"?by=day", []usageJSON{{Day: "2025-03-01", Requests: 2, PromptTokens: 15, CompletionTokens: 15, TotalTokens: 30, Cost: "0.00003"},
				{Day: "2025-03-02", Requests: 2, PromptTokens: 52, CompletionTokens: 53, TotalTokens: 105, Cost: "0.0001", UnpricedRequests: 1}}},
			{"?by=account,model&account_id=" + a.ID, []usageJSON{
				{AccountID: a.ID, Model: "gpt-4o", Requests: 2, PromptTokens: 15, CompletionTokens: 15, TotalTokens: 30, Cost: "0.00003"},
				{AccountID: a.ID, Model: "gpt-4o-mini", Requests: 1, PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5, Cost: "0.00",
					UnpricedRequests: 1}}},
			{"?by=key&by=day&model=gpt-4o&from=2025-03-02", []usageJSON{
				{Day: "2025-03-02", KeyID: kb.ID, Requests: 1, PromptTokens: 50, CompletionTokens: 50, TotalTokens: 100, Cost: "0.0001"}}},
			{"?by=key&key_id=" + ka.ID + "&to=2025-03-01T11:00:00Z", []usageJSON{
				{KeyID: ka.ID, Requests: 1, PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10, Cost: "0.00001"}}},
			{"?from=2025-04-01", []usageJSON{}},
		} {
			t.Run(tc.query, func(t *testing.T) {
				var got list[usageJSON]
				if st := h.call(t, "GET", "/admin/v1/usage"+tc.query, nil, &got); st != 200 {
					t.Fatalf("status %d", st)
				}
				if diff := cmp.Diff(tc.want, got.Data, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
