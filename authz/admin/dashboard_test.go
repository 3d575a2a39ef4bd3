package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/sqlite"
)

func sqliteStore(t *testing.T) authz.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "admin.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	base   string
	client *http.Client
}

func newBrowser(t testing.TB, srv *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	c := *srv.Client() // a copy: srv.Client() is one client shared by all callers
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{base: srv.URL, client: &c}
}

// page is a response with its body read.
type page struct {
	*http.Response
	Body string
}

func (b *browser) do(t testing.TB, req *http.Request) page {
	t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{resp, string(body)}
}

func (b *browser) get(t testing.TB, path string) page {
	t.Helper()
	req, _ := http.NewRequest("GET", b.base+path, nil)
	return b.do(t, req)
}

func (b *browser) post(t testing.TB, path string, form url.Values, header ...string) page {
	t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(t, req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token in a page's forms.
func csrf(t testing.TB, p page) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no CSRF token in %s", p.Body)
	}
	return m[1]
}

// signIn signs the browser in and returns its session's CSRF token.
func (b *browser) signIn(t testing.TB) string {
	t.Helper()
	login := b.get(t, "/admin/login")
	p := b.post(t, "/admin/login", url.Values{"csrf": {csrf(t, login)}, "token": {testToken}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/" {
		t.Fatalf("sign-in: %d to %q: %s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
	return csrf(t, b.get(t, "/admin/accounts"))
}

func TestDashboardRequiresSignIn(t *testing.T) {
	h := newHarness(t, sqliteStore(t))
	b := newBrowser(t, h.srv)
	for _, path := range []string{"/admin/", "/admin/accounts", "/admin/accounts/x", "/admin/groups", "/admin/keys/x", "/admin/usage", "/admin/nothing"} {
		if p := b.get(t, path); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/login" {
			t.Errorf("GET %s: %d to %q, want 303 to the sign-in page", path, p.StatusCode, p.Header.Get("Location"))
		}
	}
	for _, path := range []string{"/admin/accounts", "/admin/groups", "/admin/keys/x/revoke", "/admin/logout"} {
		if p := b.post(t, path, url.Values{"name": {"x"}}); p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Body, "sign in again") {
			t.Errorf("POST %s: %d, want 401", path, p.StatusCode)
		}
	}
	if p := b.get(t, "/admin/static/admin.css"); p.StatusCode != 200 || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet: %d %s", p.StatusCode, p.Header.Get("Content-Type"))
	}
}

func TestDashboardSignIn(t *testing.T) {
	h := newHarness(t, sqliteStore(t))
	b := newBrowser(t, h.srv)
	login := b.get(t, "/admin/login")
	token := csrf(t, login)
	pre := sessionCookie(t, login.Response, "modelgate_admin")

	t.Run("wrong token", func(t *testing.T) {
		p := b.post(t, "/admin/login", url.Values{"csrf": {token}, "token": {"wrong"}})
		if p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Body, "not the admin token") {
			t.Errorf("%d %s", p.StatusCode, p.Body)
		}
	})
	t.Run("no CSRF token", func(t *testing.T) {
		if p := b.post(t, "/admin/login", url.Values{"token": {testToken}}); p.StatusCode != http.StatusForbidden {
			t.Errorf("%d, want 403", p.StatusCode)
		}
	})
	t.Run("CSRF token of another browser", func(t *testing.T) {
		other := newBrowser(t, h.srv)
		if p := b.post(t, "/admin/login", url.Values{"csrf": {csrf(t, other.get(t, "/admin/login"))}, "token": {testToken}}); p.StatusCode != http.StatusForbidden {
			t.Errorf("%d, want 403", p.StatusCode)
		}
	})
	p := b.post(t, "/admin/login", url.Values{"csrf": {token}, "token": {testToken}})
	c := sessionCookie(t, p.Response, "modelgate_admin")
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" || c.MaxAge != 12*3600 {
		t.Errorf("session cookie over plain HTTP = %+v", c)
	}
	if c.Value == pre.Value {
		t.Error("signing in kept the cookie value it was given before: session fixation")
	}
	csrfSession := csrf(t, b.get(t, "/admin/accounts"))
	if csrfSession == token {
		t.Error("the session's CSRF token is the sign-in form's")
	}
	if p := b.get(t, "/admin/login"); p.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in page when signed in: %d", p.StatusCode)
	}

	// Signing out ends the session on the server: the old cookie is dead.
	if p := b.post(t, "/admin/logout", url.Values{"csrf": {csrfSession}}); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/login" {
		t.Fatalf("sign out: %d", p.StatusCode)
	}
	req, _ := http.NewRequest("GET", h.srv.URL+"/admin/accounts", nil)
	req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	if resp, _ := h.srv.Client().Do(req); resp.Request.URL.Path != "/admin/login" {
		t.Errorf("the cookie still works after signing out: ended at %s", resp.Request.URL)
	}
}

func TestDashboardSecureCookieOverTLS(t *testing.T) {
	hd, err := New(sqliteStore(t), Config{TokenSHA256: sha256.Sum256([]byte(testToken))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(hd)
	defer srv.Close()
	b := newBrowser(t, srv)
	login := b.get(t, "/admin/login")
	p := b.post(t, "/admin/login", url.Values{"csrf": {csrf(t, login)}, "token": {testToken}})
	c := sessionCookie(t, p.Response, "__Host-modelgate_admin")
	if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" {
		t.Errorf("session cookie over TLS = %+v", c)
	}
	if p := b.get(t, "/admin/accounts"); p.StatusCode != 200 {
		t.Errorf("signed-in page over TLS: %d", p.StatusCode)
	}
}

func sessionCookie(t *testing.T, resp *http.Response, name string) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no cookie %s in %v", name, resp.Header["Set-Cookie"])
	return nil
}

// Every form refuses a POST without its session's CSRF token, and changes
// nothing.
func TestDashboardCSRF(t *testing.T) {
	s := sqliteStore(t)
	h := newHarness(t, s)
	ctx := context.Background()
	g, _ := s.CreateGroup(ctx, authz.Group{Name: "team"})
	a, _ := s.CreateAccount(ctx, "acme")
	secret, k, _ := authz.CreateKey(ctx, s, a.ID, "", nil)
	b := newBrowser(t, h.srv)
	good := b.signIn(t)
	other := newBrowser(t, h.srv).signIn(t)

	forms := []struct {
		path string
		form url.Values
	}{
		{"/admin/groups", url.Values{"name": {"new-group"}}},
		{"/admin/groups/" + g.ID, url.Values{"name": {"renamed"}}},
		{"/admin/accounts", url.Values{"name": {"new-account"}}},
		{"/admin/accounts/" + a.ID, url.Values{"name": {"renamed"}, "disabled": {"on"}}},
		{"/admin/accounts/" + a.ID + "/keys", url.Values{"name": {"new-key"}}},
		{"/admin/keys/" + k.ID, url.Values{"name": {"renamed"}}},
		{"/admin/keys/" + k.ID + "/disable", nil},
		{"/admin/keys/" + k.ID + "/expire", nil},
		{"/admin/keys/" + k.ID + "/revoke", nil},
		{"/admin/logout", nil},
	}
	for _, f := range forms {
		for name, token := range map[string]string{"missing": "", "another session's": other, "altered": good[1:] + "A"} {
			t.Run(f.path+"/"+name, func(t *testing.T) {
				form := url.Values{}
				for k, v := range f.form {
					form[k] = v
				}
				if token != "" {
					form.Set("csrf", token)
				}
				if p := b.post(t, f.path, form); p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "stale") {
					t.Errorf("%d, want 403", p.StatusCode)
				}
			})
		}
	}
	gs, _ := s.ListGroups(ctx)
	as, _ := s.ListAccounts(ctx)
	ks, _ := s.ListKeys(ctx, a.ID)
	if len(gs) != 1 || gs[0].Name != "team" || len(as) != 1 || as[0].Name != "acme" || as[0].Disabled || len(ks) != 1 || ks[0].Name != "" {
		t.Errorf("refused forms changed something: %+v %+v %+v", gs, as, ks)
	}
	if _, err := h.auth.Authenticate(ctx, secret); err != nil {
		t.Errorf("refused forms changed the key: %v", err)
	}

	// With the token, the same forms work.
	for _, f := range forms[:6] {
		f.form.Set("csrf", good)
		if p := b.post(t, f.path, f.form); p.StatusCode/100 != 2 && p.StatusCode != http.StatusSeeOther {
			t.Errorf("POST %s with the CSRF token: %d %s", f.path, p.StatusCode, p.Body)
		}
	}
	// A cross-site POST is refused even with a valid token.
	if p := b.post(t, "/admin/keys/"+k.ID+"/revoke", url.Values{"csrf": {good}}, "Sec-Fetch-Site", "cross-site"); p.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", p.StatusCode)
	}
	if k, _ := s.KeyByID(ctx, k.ID); k.RevokedAt != nil {
		t.Error("a cross-site POST revoked the key")
	}
}

// hostile is a name that would run script if printed unescaped anywhere:
// in text, in an attribute, in a URL or in the chart's SVG.
const hostile = `<script>alert(1)</script>"'><img src=x onerror=alert(2)>`

func TestDashboardEscapesOutput(t *testing.T) {
	s := sqliteStore(t)
	h := newHarness(t, s)
	ctx := context.Background()
	var g groupJSON
	var a accountJSON
	var created createdKey
	h.call(t, "POST", "/admin/v1/groups", map[string]any{"name": hostile}, &g)
	h.call(t, "POST", "/admin/v1/accounts", map[string]any{"name": hostile, "group_id": g.ID}, &a)
	h.call(t, "POST", "/admin/v1/accounts/"+a.ID+"/keys", map[string]any{"name": hostile}, &created)
	if a.Name != hostile || created.Key.Name != hostile {
		t.Fatalf("names were not kept as given: %q %q", a.Name, created.Key.Name)
	}
	s.AppendUsage(ctx, ledger.UsageRecord{RequestID: "r1", KeyID: created.Key.ID, AccountID: a.ID, Model: "gpt-4o", TotalTokens: 9, At: time.Now()})
	b := newBrowser(t, h.srv)
	token := b.signIn(t)
	pages := map[string]page{}
	for _, path := range []string{"/admin/accounts", "/admin/accounts/" + a.ID, "/admin/groups", "/admin/groups/" + g.ID,
		"/admin/keys/" + created.Key.ID, "/admin/usage?grouped=1&by=day&by=account&by=key&by=model&account_id=" + url.QueryEscape(a.ID)} {
		pages[path] = b.get(t, path)
	}
	made := b.post(t, "/admin/accounts/"+a.ID+"/keys", url.Values{"csrf": {token}, "name": {hostile}})
	pages["key created"] = b.get(t, made.Header.Get("Location"))
	pages["prices"] = b.get(t, "/admin/prices")
	pages["audit"] = b.get(t, "/admin/audit")
	for name, p := range pages {
		if p.StatusCode/100 != 2 {
			t.Errorf("%s: %d", name, p.StatusCode)
		}
		for _, raw := range []string{"<script>alert", "<img src=x", `"'>`} {
			if strings.Contains(p.Body, raw) {
				t.Errorf("%s: the page holds %q unescaped", name, raw)
			}
		}
		// The audit log shows the names inside JSON, which escapes < itself;
		// the prices page has no names.
		if name != "prices" && name != "audit" && !strings.Contains(p.Body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the escaped name is missing", name)
		}
		if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", name, csp)
		}
	}
}

// A key made in the dashboard is shown once, works, and stops working the
// moment it is revoked.
func TestDashboardKeyShownOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		h := newHarness(t, s)
		ctx := context.Background()
		b := newBrowser(t, h.srv)
		token := b.signIn(t)
		p := b.post(t, "/admin/accounts", url.Values{"csrf": {token}, "name": {"acme"}})
		if p.StatusCode != http.StatusSeeOther {
			t.Fatalf("create account: %d %s", p.StatusCode, p.Body)
		}
		accountPath := strings.TrimSuffix(p.Header.Get("Location"), "?done=created")
		// Post/redirect/get: the POST redirects to the page that shows the
		// secret, once; reloading that page shows it no more.
		p = b.post(t, accountPath+"/keys", url.Values{"csrf": {token}, "name": {"laptop"}, "models": {"gpt-4o-mini"}})
		createdPath := p.Header.Get("Location")
		if p.StatusCode != http.StatusSeeOther || !strings.HasSuffix(createdPath, "/created") {
			t.Fatalf("create key: %d to %q: %s", p.StatusCode, createdPath, p.Body)
		}
		p = b.get(t, createdPath)
		secret := regexp.MustCompile(`<code id="secret">([^<]+)</code>`).FindStringSubmatch(p.Body)
		if p.StatusCode != http.StatusOK || secret == nil || p.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("the created key's page: %d, Cache-Control %q: %s", p.StatusCode, p.Header.Get("Cache-Control"), p.Body)
		}
		again := b.get(t, createdPath)
		if again.StatusCode != http.StatusSeeOther || strings.Contains(again.Body, secret[1]) {
			t.Fatalf("reloading the created key's page: %d %s", again.StatusCode, again.Body)
		}
		if shown := b.get(t, again.Header.Get("Location")); strings.Contains(shown.Body, secret[1]) || !strings.Contains(shown.Body, "cannot be shown again") {
			t.Errorf("the key page after the reload shows the secret, or not why it is gone: %s", shown.Body)
		}
		pr, err := h.auth.Authenticate(ctx, secret[1])
		if err != nil || !pr.Allows("gpt-4o-mini") || pr.Allows("gpt-4o") {
			t.Fatalf("the new key: %+v %v", pr, err)
		}
		account := b.get(t, accountPath)
		if strings.Contains(account.Body, secret[1]) || !strings.Contains(account.Body, pr.KeyPrefix+"…") {
			t.Errorf("the account page shows the secret, or not the prefix")
		}
		keyPath := "/admin/keys/" + pr.KeyID
		for _, step := range []struct {
			action, state string
			err           error
		}{{"disable", "disabled", authz.ErrDisabled}, {"enable", "active", nil}, {"revoke", "revoked", authz.ErrUnauthenticated}} {
			p := b.post(t, keyPath+"/"+step.action, url.Values{"csrf": {token}})
			if p.StatusCode != http.StatusSeeOther {
				t.Fatalf("%s: %d %s", step.action, p.StatusCode, p.Body)
			}
			_, err := h.auth.Authenticate(ctx, secret[1])
			key := b.get(t, p.Header.Get("Location"))
			if !errors.Is(err, step.err) || !strings.Contains(key.Body, `id="key-state">`+step.state+`<`) || strings.Contains(key.Body, secret[1]) {
				t.Errorf("after %s: Authenticate %v, want %v; page state %q", step.action, err, step.err, step.state)
			}
		}
		if p := b.post(t, keyPath+"/enable", url.Values{"csrf": {token}}); p.StatusCode != http.StatusConflict {
			t.Errorf("enabling a revoked key: %d, want 409", p.StatusCode)
		}
	})
}

func TestDashboardUsage(t *testing.T) {
	s := sqliteStore(t)
	h := newHarness(t, s)
	ctx := context.Background()
	a, _ := s.CreateAccount(ctx, "acme")
	_, k, _ := authz.CreateKey(ctx, s, a.ID, "laptop", nil)
	day := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	s.AppendUsageBatch(ctx, []ledger.UsageRecord{
		{RequestID: "1", KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o-mini", TotalTokens: 1200, At: day},
		{RequestID: "2", KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o", TotalTokens: 300, At: day.AddDate(0, 0, 2),
			Cost: 3_000_000, CostKnown: true},
	})
	b := newBrowser(t, h.srv)
	b.signIn(t)
	p := b.get(t, "/admin/usage?from=2025-03-01&to=2025-03-31&grouped=1&by=day&by=key&by=model")
	if p.StatusCode != 200 {
		t.Fatalf("%d %s", p.StatusCode, p.Body)
	}
	for _, want := range []string{`<svg id="usage-chart"`, "2025-03-10: 1,200 tokens in 1 requests", "2025-03-12: 300 tokens",
		"<td>2025-03-10</td>", k.Prefix + "… laptop", "<td>gpt-4o-mini</td>", `<td class="num">1,500</td>`,
		`<td class="num">no price</td>`, `<td class="num">USD 0.003</td>`, `<td class="num">USD 0.003 (1 without a price)</td>`} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("usage page lacks %q", want)
		}
	}
	if n := strings.Count(p.Body, `<rect class="bar"`); n != 31 {
		t.Errorf("%d bars, want one per day of March", n)
	}
	if p := b.get(t, "/admin/usage?from=2025-03-01&to=2024-03-01"); p.StatusCode != 400 {
		t.Errorf("backwards range: %d", p.StatusCode)
	}
	if p := b.get(t, "/admin/usage?from=2025-04-01&to=2025-04-02"); !strings.Contains(p.Body, "No usage in this range") {
		t.Error("an empty range does not say so")
	}
}
