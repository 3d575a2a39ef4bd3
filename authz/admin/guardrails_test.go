package admin

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// Groups, accounts and keys add optional guardrail rules by name through
// the API: kept in order, trimmed and each once, shown, changed by PATCH,
// carried over by a rotation, and the union reaches the principal. Names
// the config may not have are taken: the admin does not know its rules.
func TestAdminAPIGuardrails(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		h := newHarness(t, s)
		ctx := context.Background()
		var g groupJSON
		if st := h.call(t, "POST", "/admin/v1/groups", `{"name":"team","guardrails":[" pii ","tone","pii"]}`, &g); st != http.StatusCreated ||
			!cmp.Equal(g.Guardrails, []string{"pii", "tone"}) {
			t.Fatalf("create group: %d %+v", st, g)
		}
		var a accountJSON
		if st := h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme","group_id":"`+g.ID+`","guardrails":["secrets","pii"]}`, &a); st != http.StatusCreated ||
			!cmp.Equal(a.Guardrails, []string{"secrets", "pii"}) {
			t.Fatalf("create account: %d %+v", st, a)
		}
		var created createdKey
		if st := h.call(t, "POST", "/admin/v1/accounts/"+a.ID+"/keys", `{"guardrails":["no such rule","tone"]}`, &created); st != http.StatusCreated ||
			!cmp.Equal(created.Key.Guardrails, []string{"no such rule", "tone"}) {
			t.Fatalf("create key: %d %+v", st, created.Key)
		}
		p, err := h.auth.Authenticate(ctx, created.Secret)
		if want := []string{"pii", "tone", "secrets", "no such rule"}; err != nil || !cmp.Equal(want, p.Guardrails) {
			t.Fatalf("principal's guardrails = %q, %v; want %q, the group's, the account's, then the key's", p.Guardrails, err, want)
		}

		// PATCH changes them, or leaves them when not sent; [] clears them.
		var got accountJSON
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, `{"disabled":false}`, &got)
		if !cmp.Equal(got.Guardrails, []string{"secrets", "pii"}) {
			t.Errorf("account after a PATCH without guardrails = %q", got.Guardrails)
		}
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, `{"guardrails":[]}`, &got)
		h.call(t, "PATCH", "/admin/v1/groups/"+g.ID, `{"guardrails":["jailbreak"]}`, &g)
		var k keyJSON
		h.call(t, "PATCH", "/admin/v1/keys/"+created.Key.ID, `{"guardrails":["tone","pii"]}`, &k)
		if got.Guardrails == nil || len(got.Guardrails) != 0 || !cmp.Equal(g.Guardrails, []string{"jailbreak"}) ||
			!cmp.Equal(k.Guardrails, []string{"tone", "pii"}) {
			t.Errorf("after PATCH: account %q, group %q, key %q", got.Guardrails, g.Guardrails, k.Guardrails)
		}
		p, err = h.auth.Authenticate(ctx, created.Secret)
		if want := []string{"jailbreak", "tone", "pii"}; err != nil || !cmp.Equal(want, p.Guardrails) {
			t.Errorf("principal's guardrails after PATCH = %q, %v; want %q", p.Guardrails, err, want)
		}
		var rotated rotatedKey
		if st := h.call(t, "POST", "/admin/v1/keys/"+k.ID+"/rotate", `{"grace":"1h"}`, &rotated); st != http.StatusCreated ||
			!cmp.Equal(rotated.Key.Guardrails, []string{"tone", "pii"}) {
			t.Errorf("rotated key: %d %+v; want the old key's guardrails", st, rotated.Key)
		}
	})
}

func TestAdminAPIGuardrailNamesChecked(t *testing.T) {
	h := newHarness(t, sqliteStore(t))
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	for _, tc := range []struct {
		name, method, path, body, message string
	}{
		{"empty", "POST", "/admin/v1/groups", `{"name":"g","guardrails":["pii",""]}`, "must not be empty"},
		{"blank", "PATCH", "/admin/v1/accounts/" + a.ID, `{"guardrails":["  "]}`, "must not be empty"},
		{"too long", "POST", "/admin/v1/accounts/" + a.ID + "/keys", `{"guardrails":["` + strings.Repeat("é", 101) + `"]}`, "at most 100 characters"},
		{"control character", "POST", "/admin/v1/groups", `{"name":"g","guardrails":["pi\u0007i"]}`, "control character"},
		{"comma", "PATCH", "/admin/v1/accounts/" + a.ID, `{"guardrails":["a,b"]}`, "comma"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e errorBody
			if st := h.call(t, tc.method, tc.path, tc.body, &e); st != http.StatusBadRequest ||
				e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.message) {
				t.Errorf("%s %s: %d %+v; want 400 with %q", tc.method, tc.path, st, e.Error, tc.message)
			}
		})
	}
	// 100 characters are allowed, and nothing was stored by the refusals.
	var got accountJSON
	if st := h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, `{"guardrails":["`+strings.Repeat("é", 100)+`"]}`, &got); st != http.StatusOK {
		t.Errorf("a 100-character name: %d", st)
	}
	var groups list[groupJSON]
	if h.call(t, "GET", "/admin/v1/groups", nil, &groups); len(groups.Data) != 0 {
		t.Errorf("groups after refusals: %+v", groups.Data)
	}
}

// The dashboard's forms of groups, accounts and keys set guardrails as
// comma-separated names; the pages show them and what is in effect, and a
// refused name is shown again in its form.
func TestDashboardGuardrails(t *testing.T) {
	h, b, token := dashboardWith(t)
	ctx := context.Background()
	p := b.post(t, "/admin/groups", url.Values{"csrf": {token}, "name": {"team"}, "guardrails": {"pii, tone,,pii"}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("creating the group: %d %s", p.StatusCode, p.Body)
	}
	g, err := h.store.GroupByName(ctx, "team")
	if err != nil || !cmp.Equal(g.Guardrails, []string{"pii", "tone"}) {
		t.Fatalf("stored group = %+v, %v", g, err)
	}
	if page := b.get(t, "/admin/groups/"+g.ID); !strings.Contains(page.Body, `name="guardrails" value="pii, tone"`) ||
		!strings.Contains(page.Body, "A name the config does not have adds nothing") {
		t.Error("the group's form does not show its guardrails and what unknown names do")
	}
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	form := url.Values{"csrf": {token}, "name": {"acme"}, "group_id": {g.ID}, "guardrails": {"secrets"}}
	if p := b.post(t, "/admin/accounts/"+a.ID, form); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the account: %d %s", p.StatusCode, p.Body)
	}
	p = b.post(t, "/admin/accounts/"+a.ID+"/keys", url.Values{"csrf": {token}, "guardrails": {"jailbreak, pii"}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("creating the key: %d %s", p.StatusCode, p.Body)
	}
	shown := b.get(t, p.Header.Get("Location"))
	secret := regexp.MustCompile(`<code id="secret">([^<]+)</code>`).FindStringSubmatch(shown.Body)
	if secret == nil || !strings.Contains(shown.Body, "<dt>Guardrails</dt><dd>jailbreak, pii</dd>") {
		t.Fatalf("the new key's page: %s", shown.Body)
	}
	principal, err := h.auth.Authenticate(ctx, secret[1])
	if want := []string{"pii", "tone", "secrets", "jailbreak"}; err != nil || !cmp.Equal(want, principal.Guardrails) {
		t.Errorf("principal's guardrails = %q, %v; want %q", principal.Guardrails, err, want)
	}
	page := b.get(t, "/admin/accounts/"+a.ID)
	if eff := effectiveSection.FindStringSubmatch(page.Body); eff == nil || !strings.Contains(eff[1], "pii, tone, secrets added") {
		t.Errorf("the In effect section does not show the group's and the account's guardrails: %v", eff)
	}
	if !strings.Contains(page.Body, "<td>jailbreak, pii</td>") {
		t.Error("the keys table does not show the key's guardrails")
	}
	for form, want := range map[string]string{"account-settings": `name="guardrails" value="secrets"`, "new-key": `name="guardrails" value=""`} {
		f := regexp.MustCompile(`(?s)<form [^>]*id="` + form + `">(.*?)</form>`).FindStringSubmatch(page.Body)
		if f == nil || !strings.Contains(f[1], want) {
			t.Errorf("the %s form lacks %s", form, want)
		}
	}

	// A refused name is shown again, with why; nothing is saved.
	long := strings.Repeat("x", 101)
	p = b.post(t, "/admin/keys/"+principal.KeyID, url.Values{"csrf": {token}, "guardrails": {"tone, " + long}})
	settings := regexp.MustCompile(`(?s)<form [^>]*id="key-settings">(.*?)</form>`).FindStringSubmatch(p.Body)
	if p.StatusCode != http.StatusBadRequest || settings == nil || !strings.Contains(settings[1], "at most 100 characters") ||
		!strings.Contains(settings[1], `value="tone, `+long+`"`) {
		t.Errorf("a 101-character name: %d %v", p.StatusCode, settings)
	}
	if k, _ := h.store.KeyByID(ctx, principal.KeyID); !cmp.Equal(k.Guardrails, []string{"jailbreak", "pii"}) {
		t.Errorf("stored key's guardrails after a refusal = %q", k.Guardrails)
	}
	// Emptying the field removes the key's own.
	if p := b.post(t, "/admin/keys/"+principal.KeyID, url.Values{"csrf": {token}, "guardrails": {" "}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("clearing the key's guardrails: %d %s", p.StatusCode, p.Body)
	}
	if k, _ := h.store.KeyByID(ctx, principal.KeyID); k.Guardrails != nil {
		t.Errorf("stored key's guardrails after clearing = %q", k.Guardrails)
	}
}
