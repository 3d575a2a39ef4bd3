package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

// Each test here reproduces a dashboard bug found by trying the dashboard
// as a new admin would, and fails without its fix.

// testClock is a settable Config.Now.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// dashboardWith signs a browser in to a handler on a fresh SQLite store.
func dashboardWith(t *testing.T, opts ...func(*Config)) (*harness, *browser, string) {
	t.Helper()
	h := newHarness(t, sqliteStore(t), opts...)
	b := newBrowser(t, h.srv)
	return h, b, b.signIn(t)
}

// effectiveSection is the account page's "In effect" list.
var effectiveSection = regexp.MustCompile(`(?s)<dl class="card" id="effective">(.*?)</dl>`)

// An account's limit of 0 allowed everything and let it escape its
// group's cap; empty now inherits, 0 allows nothing, and the page shows
// what is in effect.
func TestDashboardLimitsInheritAndCap(t *testing.T) {
	h, b, token := dashboardWith(t)
	ctx := context.Background()
	var g groupJSON
	h.call(t, "POST", "/admin/v1/groups", `{"name":"team","limits":{"requests_per_minute":100,"tokens_per_day":5000}}`, &g)
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme","group_id":"`+g.ID+`"}`, &a)
	secret, _, err := authz.CreateKey(ctx, h.store, a.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"csrf": {token}, "name": {"acme"}, "group_id": {g.ID},
		"requests_per_minute": {"1000"}, "tokens_per_day": {"0"}, "tokens_per_minute": {""}}
	if p := b.post(t, "/admin/accounts/"+a.ID, form); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the account: %d %s", p.StatusCode, p.Body)
	}
	stored, _ := h.store.AccountByID(ctx, a.ID)
	if stored.Limits.TokensPerDay == nil || *stored.Limits.TokensPerDay != 0 || stored.Limits.TokensPerMinute != nil {
		t.Errorf("stored limits = %+v: want tokens/day 0 kept, tokens/minute unset", stored.Limits)
	}
	p, err := h.auth.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if *p.Limits.RequestsPerMinute != 100 || *p.Limits.TokensPerDay != 0 {
		t.Errorf("effective limits = %v: want the group's 100 requests/min and tokens/day 0", limitsText(p.Limits))
	}
	page := b.get(t, "/admin/accounts/"+a.ID)
	eff := effectiveSection.FindStringSubmatch(page.Body)
	if eff == nil || !strings.Contains(eff[1], "100 requests/min, 0 tokens/day") || !strings.Contains(eff[1], ">team</a>") {
		t.Errorf("the In effect section = %v", eff)
	}
	if !strings.Contains(page.Body, `placeholder="inherits 100"`) || !strings.Contains(page.Body, "0 allows nothing") {
		t.Error("the limit fields do not say what empty and 0 mean")
	}
}

// The usage page kept a key filter of the previous account when another
// account was chosen, showing "No usage" and wrong totals.
func TestDashboardUsageDropsAnotherAccountsKey(t *testing.T) {
	h, b, _ := dashboardWith(t)
	ctx := context.Background()
	var one, two accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"one"}`, &one)
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"two"}`, &two)
	_, k1, _ := authz.CreateKey(ctx, h.store, one.ID, "", nil)
	_, k2, _ := authz.CreateKey(ctx, h.store, two.ID, "", nil)
	now := time.Now()
	h.store.AppendUsage(ctx, ledger.UsageRecord{RequestID: "a", KeyID: k1.ID, AccountID: one.ID, Model: "gpt-4o", Status: 200, TotalTokens: 11, At: now})
	h.store.AppendUsage(ctx, ledger.UsageRecord{RequestID: "b", KeyID: k2.ID, AccountID: two.ID, Model: "gpt-4o", Status: 200, TotalTokens: 22, At: now})
	// Account "two" chosen while the form still held account one's key.
	p := b.get(t, "/admin/usage?grouped=1&by=account&account_id="+two.ID+"&key_id="+k1.ID)
	if strings.Contains(p.Body, "No usage in this range") || !regexp.MustCompile(`<td class="num">22</td>`).MatchString(p.Body) {
		t.Errorf("account two's usage with account one's key left in the form: %s", p.Body)
	}
	if strings.Contains(p.Body, `value="`+k1.ID+`"`) {
		t.Error("the form still carries the other account's key")
	}
}

// Keys of a disabled account showed "active"; the account page did not
// show its group's models and limits; key forms offered models the group
// forbids.
func TestDashboardShowsTheEffectiveState(t *testing.T) {
	h, b, token := dashboardWith(t)
	ctx := context.Background()
	var g groupJSON
	h.call(t, "POST", "/admin/v1/groups", `{"name":"narrow","models":["gpt-4o"],"limits":{"concurrent_requests":2}}`, &g)
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme","group_id":"`+g.ID+`"}`, &a)
	_, k, _ := authz.CreateKey(ctx, h.store, a.ID, "", nil)
	page := b.get(t, "/admin/accounts/"+a.ID)
	newKey := regexp.MustCompile(`(?s)<form [^>]*id="new-key">(.*?)</form>`).FindStringSubmatch(page.Body)
	if newKey == nil || !strings.Contains(newKey[1], `value="gpt-4o"`) || strings.Contains(newKey[1], `value="gpt-4o-mini"`) {
		t.Errorf("the new key form offers models the group forbids: %v", newKey)
	}
	eff := effectiveSection.FindStringSubmatch(page.Body)
	if eff == nil || !strings.Contains(eff[1], "gpt-4o") || !strings.Contains(eff[1], "2 concurrent requests") {
		t.Errorf("the account page does not show its group's models and limits: %v", eff)
	}
	if p := b.post(t, "/admin/accounts/"+a.ID+"/disable", url.Values{"csrf": {token}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("disabling: %d %s", p.StatusCode, p.Body)
	}
	page = b.get(t, "/admin/accounts/"+a.ID)
	if !strings.Contains(page.Body, "disabled (account)") {
		t.Error("a key of a disabled account is not shown as disabled")
	}
	if key := b.get(t, "/admin/keys/"+k.ID); !strings.Contains(key.Body, `id="key-state">disabled (account)<`) {
		t.Error("the key's page does not show it disabled by its account")
	}
	keyForm := regexp.MustCompile(`(?s)<form [^>]*id="key-settings">(.*?)</form>`).FindStringSubmatch(b.get(t, "/admin/keys/"+k.ID).Body)
	if keyForm == nil || strings.Contains(keyForm[1], `value="claude-sonnet"`) {
		t.Errorf("the key form offers models the group forbids")
	}
	if !strings.Contains(b.get(t, "/admin/accounts/"+a.ID).Body, `action="/admin/accounts/`+a.ID+`/enable"`) {
		t.Error("no way to enable the account again")
	}
}

// Disabling an account asks first: its button is in a form the script
// confirms, not a checkbox among the settings.
func TestDashboardDisableAccountAsks(t *testing.T) {
	h, b, _ := dashboardWith(t)
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	page := b.get(t, "/admin/accounts/"+a.ID)
	if !regexp.MustCompile(`<form method="post" action="/admin/accounts/` + a.ID + `/disable" data-confirm="[^"]+">`).MatchString(page.Body) {
		t.Error("the disable form does not ask for confirmation")
	}
	if strings.Contains(page.Body, `name="disabled"`) {
		t.Error("the settings form can still disable the account without asking")
	}
}

// Validation errors replaced the page; they are now shown in the form,
// with what was typed, in plain words. Names count characters, as the
// forms' maxlength does, not bytes.
func TestDashboardFormErrorsKeepWhatWasTyped(t *testing.T) {
	h, b, token := dashboardWith(t)
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	accented := strings.Repeat("é", 200) // 400 bytes, 200 characters
	form := url.Values{"csrf": {token}, "name": {accented}, "budget_amount": {"12,50"}, "budget_period": {"month"},
		"requests_per_minute": {"60"}}
	p := b.post(t, "/admin/accounts/"+a.ID, form)
	settings := regexp.MustCompile(`(?s)<form [^>]*id="account-settings">(.*?)</form>`).FindStringSubmatch(p.Body)
	if p.StatusCode != http.StatusBadRequest || settings == nil {
		t.Fatalf("a bad budget: %d %s", p.StatusCode, p.Body)
	}
	for _, want := range []string{`role="alert">Budget: &#34;12,50&#34; is not an amount such as 12.50.`, `value="` + accented + `"`,
		`name="requests_per_minute" value="60"`, `name="budget_amount" inputmode="decimal" value="12,50"`} {
		if !strings.Contains(settings[1], want) {
			t.Errorf("the refused form lacks %q", want)
		}
	}
	if strings.Contains(p.Body, "budget_amount:") || strings.Contains(p.Body, "requests_per_minute:") {
		t.Error("the message names an API field")
	}
	// 200 accented characters fit: the form allows them.
	form.Set("budget_amount", "12.50")
	if p := b.post(t, "/admin/accounts/"+a.ID, form); p.StatusCode != http.StatusSeeOther {
		t.Errorf("a 200-character name: %d %s", p.StatusCode, p.Body)
	}
	form.Set("name", accented+"é")
	p = b.post(t, "/admin/accounts/"+a.ID, form)
	if p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "at most 200 characters") {
		t.Errorf("a 201-character name: %d", p.StatusCode)
	}
	// A refused new account keeps its name too.
	p = b.post(t, "/admin/accounts", url.Values{"csrf": {token}, "name": {accented}})
	newAccount := regexp.MustCompile(`(?s)<form [^>]*id="new-account">(.*?)</form>`).FindStringSubmatch(p.Body)
	if p.StatusCode != http.StatusConflict || newAccount == nil || !strings.Contains(newAccount[1], `role="alert"`) ||
		!strings.Contains(newAccount[1], `value="`+accented+`"`) {
		t.Errorf("a taken name: %d %v", p.StatusCode, newAccount)
	}
}

// With 500 accounts the list was one page 46,000 pixels tall; it now
// finds by name, sorts and pages, and so does the admin API.
func TestDashboardAccountsFindSortAndPage(t *testing.T) {
	h, b, _ := dashboardWith(t)
	ctx := context.Background()
	for i := range 120 {
		if i == 119 {
			time.Sleep(5 * time.Millisecond) // the newest by a clear margin
		}
		if _, err := h.store.CreateAccount(ctx, "team-"+strconv.Itoa(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	rows := regexp.MustCompile(`<tr>\s*<td><a href="/admin/accounts/[^"]+">([^<]+)</a></td>`)
	p := b.get(t, "/admin/accounts")
	names := rows.FindAllStringSubmatch(p.Body, -1)
	next := regexp.MustCompile(`href="/admin/accounts\?([^"]+)" id="next-page"`).FindStringSubmatch(p.Body)
	if len(names) != 50 || names[0][1] != "team-1000" || next == nil {
		t.Fatalf("first page: %d rows, next %v", len(names), next)
	}
	second := rows.FindAllStringSubmatch(b.get(t, "/admin/accounts?"+strings.ReplaceAll(next[1], "&amp;", "&")).Body, -1)
	if len(second) != 50 || second[0][1] != "team-1050" {
		t.Errorf("second page (%d) starts at %v; next %s", len(second), second[0][1], next[1])
	}
	found := rows.FindAllStringSubmatch(b.get(t, "/admin/accounts?q=TEAM-111").Body, -1)
	if len(found) != 10 || found[0][1] != "team-1110" {
		t.Errorf("found %d for team-111", len(found))
	}
	newest := rows.FindAllStringSubmatch(b.get(t, "/admin/accounts?sort=created").Body, -1)
	if newest[0][1] != "team-1119" {
		t.Errorf("newest first starts with %s", newest[0][1])
	}
	var page pageJSON[accountJSON]
	h.call(t, "GET", "/admin/v1/accounts?limit=100", nil, &page)
	var rest pageJSON[accountJSON]
	if len(page.Data) != 100 || page.NextAfter == nil {
		t.Fatalf("API page: %d, next %v", len(page.Data), page.NextAfter)
	}
	h.call(t, "GET", "/admin/v1/accounts?limit=100&after="+url.QueryEscape(*page.NextAfter), nil, &rest)
	if len(rest.Data) != 20 || rest.NextAfter != nil || rest.Data[0].Name != "team-1100" {
		t.Errorf("API second page: %d from %v", len(rest.Data), rest.Data)
	}
	var e errorBody
	if st := h.call(t, "GET", "/admin/v1/accounts?after=%25%25", nil, &e); st != 400 {
		t.Errorf("a bad cursor: %d", st)
	}
}

// Key rotation: a new secret with the same settings, the old one working
// for the grace period chosen, then not.
func TestDashboardRotatesKeys(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	h, b, token := dashboardWith(t, func(c *Config) { c.Now = clock.Now })
	ctx := context.Background()
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	var created createdKey
	h.call(t, "POST", "/admin/v1/accounts/"+a.ID+"/keys", `{"name":"ci","models":["gpt-4o"],"budget":{"amount":"5","period":"day"}}`, &created)
	p := b.post(t, "/admin/keys/"+created.Key.ID+"/rotate", url.Values{"csrf": {token}, "grace": {"1h"}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("rotate: %d %s", p.StatusCode, p.Body)
	}
	shown := b.get(t, p.Header.Get("Location"))
	secret := regexp.MustCompile(`<code id="secret">([^<]+)</code>`).FindStringSubmatch(shown.Body)
	if secret == nil {
		t.Fatalf("the rotated key's secret is not shown: %s", shown.Body)
	}
	auth := authz.NewAuthenticator(h.store, authz.AuthenticatorConfig{Now: clock.Now, TTL: time.Nanosecond})
	np, err := auth.Authenticate(ctx, secret[1])
	if err != nil || !np.Allows("gpt-4o") || np.Allows("gpt-4o-mini") || np.KeyBudget == nil || np.KeyBudget.Amount != 5_000_000_000 {
		t.Fatalf("the new key: %+v %v", np, err)
	}
	old, _ := h.store.KeyByID(ctx, created.Key.ID)
	if old.ExpiresAt == nil || !old.ExpiresAt.Equal(clock.Now().Add(time.Hour)) {
		t.Errorf("the old key expires at %v, want in an hour", old.ExpiresAt)
	}
	var e errorBody
	if st := h.call(t, "POST", "/admin/v1/keys/"+np.KeyID+"/rotate", `{"grace":"8760h"}`, &e); st != 400 ||
		!strings.Contains(e.Error.Message, "at most 720h0m0s") {
		t.Errorf("rotating with a year's grace: %d %+v, want 400: the grace is bounded", st, e)
	}
	if p := b.post(t, "/admin/keys/"+np.KeyID+"/rotate", url.Values{"csrf": {token}, "grace": {"9000h"}}); p.StatusCode != 400 {
		t.Errorf("rotating with 9000h of grace in the dashboard: %d", p.StatusCode)
	}
	var rotated rotatedKey
	if st := h.call(t, "POST", "/admin/v1/keys/"+np.KeyID+"/rotate", `{"grace":"0s"}`, &rotated); st != 201 ||
		rotated.Secret == "" || rotated.Old.State != "expired" {
		t.Errorf("rotating through the API with no grace: %d %+v", st, rotated.Old)
	}
}

// Wrong admin tokens are throttled per address, on the dashboard and the
// API alike: after five, the address's wrong tokens get 429 until the
// window ends. The right token is never refused, so five wrong guesses
// from behind the same proxy or NAT do not lock the admins out.
func TestWrongAdminTokensThrottledNeverTheRightOne(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	h := newHarness(t, sqliteStore(t), func(c *Config) { c.Now = clock.Now })
	b := newBrowser(t, h.srv)
	token := csrf(t, b.get(t, "/admin/login"))
	wrongSignIn := func() page {
		return b.post(t, "/admin/login", url.Values{"csrf": {token}, "token": {"wrong-" + clock.now.String()}})
	}
	for i := range failLimit {
		if p := wrongSignIn(); p.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, p.StatusCode)
		}
	}
	if p := wrongSignIn(); p.StatusCode != http.StatusTooManyRequests || !strings.Contains(p.Body, "refused for 15 minutes") {
		t.Fatalf("after %d failures: %d %s", failLimit, p.StatusCode, p.Body)
	}
	// The API shares the address's count: a wrong bearer token is 429 with
	// Retry-After, the right one works.
	resp := h.raw(t, "GET", "/admin/v1/accounts", "wrong-bearer-token")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "900" {
		t.Errorf("a wrong API token from the throttled address: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := h.raw(t, "GET", "/admin/v1/accounts", testToken); resp.StatusCode != http.StatusOK {
		t.Errorf("the right API token from the throttled address: %d", resp.StatusCode)
	}
	if p := b.post(t, "/admin/login", url.Values{"csrf": {token}, "token": {testToken}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("the right token from the throttled address: %d %s", p.StatusCode, p.Body)
	}
	clock.Add(failWindow)
	if resp := h.raw(t, "GET", "/admin/v1/accounts", "wrong-bearer-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong API token after the window: %d", resp.StatusCode)
	}
}

// The admin API alone throttles wrong tokens too.
func TestAdminAPIThrottlesWrongTokens(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	h := newHarness(t, sqliteStore(t), func(c *Config) { c.Now = clock.Now })
	for i := range failLimit {
		if resp := h.raw(t, "POST", "/admin/v1/accounts", "guess-"+strconv.Itoa(i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, resp.StatusCode)
		}
	}
	clock.Add(time.Minute)
	resp := h.raw(t, "POST", "/admin/v1/accounts", "guess")
	var body struct {
		Error struct{ Type, Message string }
	}
	json.NewDecoder(resp.Body).Decode(&body) //nolint:errcheck // checked below
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "840" || body.Error.Type != "rate_limit_error" {
		t.Errorf("after %d wrong tokens: %d, Retry-After %q, %+v", failLimit, resp.StatusCode, resp.Header.Get("Retry-After"), body.Error)
	}
}

// The usage page exports its rows as CSV: the same filter, a header, costs
// as exact decimals, and names that cannot run as spreadsheet formulas.
func TestDashboardUsageCSV(t *testing.T) {
	h, b, _ := dashboardWith(t, func(c *Config) { c.Currency = "EUR" })
	ctx := context.Background()
	var a, other accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"=HYPERLINK(\"x\")"}`, &a)
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"other"}`, &other)
	_, k, _ := authz.CreateKey(ctx, h.store, a.ID, "", nil)
	_, ko, _ := authz.CreateKey(ctx, h.store, other.ID, "", nil)
	now := time.Now()
	for i, r := range []ledger.UsageRecord{
		{KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o", Status: 200, PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Cost: 1_500_000, CostKnown: true,
			WebSearchRequests: 2},
		{KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o", Status: 429},
		{KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o", Status: 502},
		{KeyID: ko.ID, AccountID: other.ID, Model: "gpt-4o", Status: 200, TotalTokens: 99},
	} {
		r.RequestID, r.At = "r"+strconv.Itoa(i), now
		if err := h.store.AppendUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	page := b.get(t, "/admin/usage?grouped=1&by=account&by=model&account_id="+a.ID)
	link := regexp.MustCompile(`href="(/admin/usage\.csv\?[^"]+)" id="usage-csv"`).FindStringSubmatch(page.Body)
	if link == nil {
		t.Fatal("no CSV link on the usage page")
	}
	p := b.get(t, strings.ReplaceAll(link[1], "&amp;", "&"))
	if p.StatusCode != 200 || p.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
		!strings.HasPrefix(p.Header.Get("Content-Disposition"), `attachment; filename="usage-`) {
		t.Fatalf("CSV: %d %v", p.StatusCode, p.Header)
	}
	want := "day,account_id,account,key_id,key,model,requests,succeeded,refused,failed,prompt_tokens,completion_tokens,total_tokens,cached_tokens,reasoning_tokens,cost,currency,unpriced_requests,audio_seconds,images,cache_write_tokens,cache_write_1h_tokens,web_search_requests\n" +
		`,` + a.ID + `,"'=HYPERLINK(""x"")",,,gpt-4o,3,1,1,1,10,5,15,0,0,0.0015,EUR,2,0,0,0,0,2` + "\n"
	if p.Body != want {
		t.Errorf("CSV =\n%s\nwant\n%s", p.Body, want)
	}
	// The page and the admin API show the web searches too.
	if !strings.Contains(page.Body, `<td class="num">0</td><td class="num">2</td>`) {
		t.Errorf("the usage page lacks the web searches:\n%s", page.Body)
	}
	var usage struct{ Data []map[string]any }
	if h.call(t, "GET", "/admin/v1/usage?by=account&account_id="+a.ID, nil, &usage); len(usage.Data) != 1 || usage.Data[0]["web_search_requests"] != 2.0 {
		t.Errorf("usage API = %+v", usage.Data)
	}
}

// raw sends an API request with token and returns the response, its body
// read and kept.
func (h *harness) raw(t *testing.T, method, path, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, h.srv.URL+path, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp
}
