package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/pricing"
)

// The admin API lists the config's prices and those set through it, sets
// prices over the config's, deletes only its own, and tells the gateway at
// once; each change is in the audit log.
func TestAPIPrices(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		changed := 0
		configured := pricing.Price{Model: "gpt-4o", Input: 2_500_000_000, Output: 10_000_000_000}
		h := newHarness(t, s, func(c *Config) {
			c.ConfigPrices, c.Currency = []pricing.Price{configured}, "EUR"
			c.PricesChanged = func() { changed++ }
		})
		type listed struct {
			Currency string
			Data     []map[string]any
		}
		var l listed
		h.call(t, "GET", "/admin/v1/prices", nil, &l)
		if l.Currency != "EUR" || len(l.Data) != 1 || l.Data[0]["source"] != "config" || l.Data[0]["input"] != "2.50" || l.Data[0]["from"] != nil {
			t.Fatalf("prices = %+v", l)
		}
		// A price from June over the config's, and one replacing the config's.
		for _, body := range []string{
			`{"model":"gpt-4o","from":"2026-06-01","input":"2","output":"8","cached_input":"0.5"}`,
			`{"model":"gpt-4o","input":"3","output":"12"}`,
		} {
			var got map[string]any
			if st := h.call(t, "PUT", "/admin/v1/prices", body, &got); st != 200 || got["source"] != "admin" {
				t.Fatalf("PUT %s: %d %v", body, st, got)
			}
		}
		if changed != 2 {
			t.Errorf("PricesChanged called %d times, want 2", changed)
		}
		h.call(t, "GET", "/admin/v1/prices", nil, &l)
		if len(l.Data) != 2 || l.Data[0]["input"] != "3.00" || l.Data[0]["source"] != "admin" ||
			l.Data[1]["from"] != "2026-06-01T00:00:00Z" || l.Data[1]["cached_input"] != "0.50" {
			t.Errorf("prices after PUT = %+v", l.Data)
		}
		for _, tc := range []struct {
			body, want string
			status     int
		}{
			{`{"model":"gpt-9","input":"1"}`, `model \"gpt-9\" is not configured`, 400},
			{`{"model":"gpt-4o","ouput":"1"}`, `unknown field \"ouput\"`, 400},
			{`{"model":"gpt-4o","input":"-1"}`, `want digits`, 400},
			{`{"model":"gpt-4o","input":1.5}`, `input`, 400},
			{`{"model":"gpt-4o","from":"June"}`, `not a date`, 400},
		} {
			var e errorBody
			if st := h.call(t, "PUT", "/admin/v1/prices", tc.body, &e); st != tc.status || !strings.Contains(e.Error.Message, strings.ReplaceAll(tc.want, `\"`, `"`)) {
				t.Errorf("PUT %s: %d %q, want %d saying %s", tc.body, st, e.Error.Message, tc.status, tc.want)
			}
		}
		// Deleting the admin's price of always brings the config's back;
		// the config's own cannot be deleted.
		if st := h.call(t, "DELETE", "/admin/v1/prices?model=gpt-4o", nil, nil); st != 200 {
			t.Errorf("DELETE: %d", st)
		}
		h.call(t, "GET", "/admin/v1/prices", nil, &l)
		if len(l.Data) != 2 || l.Data[0]["input"] != "2.50" || l.Data[0]["source"] != "config" {
			t.Errorf("after DELETE = %+v", l.Data)
		}
		var e errorBody
		if st := h.call(t, "DELETE", "/admin/v1/prices?model=gpt-4o", nil, &e); st != 409 || !strings.Contains(e.Error.Message, "config file") {
			t.Errorf("deleting the config's price: %d %+v", st, e)
		}
		if st := h.call(t, "DELETE", "/admin/v1/prices?model=gpt-4o&from=2027-01-01", nil, &e); st != 404 {
			t.Errorf("deleting no price: %d %+v", st, e)
		}
		var audit auditList
		h.call(t, "GET", "/admin/v1/audit?target="+"price%20gpt-4o%20from%20always", nil, &audit)
		if len(audit.Data) != 2 || audit.Data[0].Action != "price.delete" || audit.Data[1].Action != "price.set" ||
			audit.Data[1].Actor != "admin API token" || !strings.Contains(string(audit.Data[1].Before), `"input":"2.50"`) ||
			!strings.Contains(string(audit.Data[1].After), `"input":"3.00"`) || !absent(audit.Data[0].After) {
			t.Errorf("audit of the price = %+v", audit.Data)
		}
	})
}

// Budgets are set, changed and removed through the API; invalid ones are
// refused in plain words; every change is in the audit log, newest first,
// with what it was before and after.
func TestAPIBudgetsAndAudit(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) {
		h := newHarness(t, s)
		var a accountJSON
		if st := h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme","budget":{"amount":"100","period":"month","alerts":true}}`, &a); st != 201 {
			t.Fatalf("create: %d", st)
		}
		if a.Budget == nil || a.Budget.Amount != 100*pricing.NanosPerUnit || a.Budget.Period != authz.PeriodMonth || !a.Budget.Alerts {
			t.Errorf("created account's budget = %+v", a.Budget)
		}
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, `{"name":"acme-2"}`, &a)
		if a.Budget == nil {
			t.Error("a PATCH without budget removed it")
		}
		h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, `{"budget":null}`, &a)
		if a.Budget != nil {
			t.Errorf("budget after null = %+v", a.Budget)
		}
		var e errorBody
		if st := h.call(t, "PATCH", "/admin/v1/accounts/"+a.ID, `{"budget":{"amount":"5","period":"year"}}`, &e); st != 400 ||
			!strings.Contains(e.Error.Message, "day, month or window") {
			t.Errorf("a budget per year: %d %+v", st, e)
		}
		var created createdKey
		if st := h.call(t, "POST", "/admin/v1/accounts/"+a.ID+"/keys", `{"budget":{"amount":"1.5","period":"window","window":"168h"}}`, &created); st != 201 {
			t.Fatalf("create key: %d", st)
		}
		if b := created.Key.Budget; b == nil || b.Window != 168*time.Hour || b.Amount != 1_500_000_000 {
			t.Errorf("key budget = %+v", b)
		}
		h.call(t, "POST", "/admin/v1/keys/"+created.Key.ID+"/revoke", nil, nil)

		var audit auditList
		h.call(t, "GET", "/admin/v1/audit", nil, &audit)
		var actions []string
		for _, e := range audit.Data {
			actions = append(actions, e.Action+" "+e.Target)
			if e.Actor != "admin API token" {
				t.Errorf("entry %d's actor = %q", e.ID, e.Actor)
			}
		}
		want := []string{"key.revoke " + created.Key.ID, "key.create " + created.Key.ID, "account.update " + a.ID,
			"account.update " + a.ID, "account.create " + a.ID}
		if strings.Join(actions, "; ") != strings.Join(want, "; ") {
			t.Fatalf("audit = %v, want %v", actions, want)
		}
		var before, after accountJSON
		json.Unmarshal(audit.Data[2].Before, &before)
		json.Unmarshal(audit.Data[2].After, &after)
		if before.Budget == nil || after.Budget != nil || before.Name != "acme-2" {
			t.Errorf("the budget's removal: before %+v, after %+v", before, after)
		}
		if !absent(audit.Data[4].Before) || !strings.Contains(string(audit.Data[4].After), `"amount":"100.00"`) {
			t.Errorf("the creation: %s → %s", audit.Data[4].Before, audit.Data[4].After)
		}
		// Pages by cursor.
		var page, next auditList
		h.call(t, "GET", "/admin/v1/audit?limit=3", nil, &page)
		if page.NextBefore == nil || len(page.Data) != 3 {
			t.Fatalf("first page = %+v", page)
		}
		h.call(t, "GET", "/admin/v1/audit?limit=3&before="+strconv.FormatInt(*page.NextBefore, 10), nil, &next)
		if len(next.Data) != 2 || next.Data[0].ID != audit.Data[3].ID || next.NextBefore != nil {
			t.Errorf("second page = %+v", next)
		}
		if st := h.call(t, "GET", "/admin/v1/audit?limit=0", nil, &e); st != 400 {
			t.Errorf("limit=0: %d", st)
		}
	})
}

// absent reports a before or after the API gives as null.
func absent(raw json.RawMessage) bool { return raw == nil || string(raw) == "null" }

// A price per web search is set through the API and the dashboard's price
// form, listed by both, and a bad one is refused in the form's words.
func TestPricesWebSearch(t *testing.T) {
	h, b, token := dashboardWith(t)
	var got map[string]any
	if st := h.call(t, "PUT", "/admin/v1/prices", `{"model":"gpt-4o","input":"3","output":"12","web_search":"0.01"}`, &got); st != 200 || got["web_search"] != "0.01" {
		t.Fatalf("PUT: %d %v", st, got)
	}
	form := url.Values{"csrf": {token}, "model": {"gpt-4o"}, "from": {"2026-06-01"}, "input": {"3"}, "output": {"12"}, "web_search": {"0.035"}}
	if p := b.post(t, "/admin/prices", form); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("the price form: %d %s", p.StatusCode, p.Body)
	}
	var l struct{ Data []map[string]any }
	h.call(t, "GET", "/admin/v1/prices", nil, &l)
	if len(l.Data) != 2 || l.Data[0]["web_search"] != "0.01" || l.Data[1]["web_search"] != "0.035" {
		t.Errorf("prices = %+v", l.Data)
	}
	if p := b.get(t, "/admin/prices"); !strings.Contains(p.Body, `<td class="num">0.035</td>`) {
		t.Errorf("the prices page lacks the web search price:\n%s", p.Body)
	}
	form.Set("web_search", "1¢")
	if p := b.post(t, "/admin/prices", form); p.StatusCode != http.StatusBadRequest ||
		!strings.Contains(p.Body, "Web search: &#34;1¢&#34; is not an amount") || !strings.Contains(p.Body, `name="web_search" inputmode="decimal" value="1¢"`) {
		t.Errorf("a bad web search price: %d %s", p.StatusCode, p.Body)
	}
}

// The dashboard's price form takes every member of a price: a form with
// every field filled gives a pricing.Price with no field left zero, so a
// field pricing.Price gains and the form lacks fails here.
func TestPriceFormCarriesEveryField(t *testing.T) {
	var f priceForm
	v := reflect.ValueOf(&f).Elem()
	for i := range v.NumField() {
		switch name := v.Type().Field(i).Name; name {
		case "Model":
			f.Model = "gpt-4o"
		case "From":
			f.From = "2026-06-01"
		case "Images":
			f.Images = "1024x1024 hd 0.04"
		default:
			v.Field(i).SetString(fmt.Sprintf("0.%02d", i+1))
		}
	}
	p, err := f.price()
	if err != nil {
		t.Fatal(err)
	}
	pv := reflect.ValueOf(p)
	for i := range pv.NumField() {
		if pv.Field(i).IsZero() {
			t.Errorf("pricing.Price.%s is not set by the price form %+v", pv.Type().Field(i).Name, f)
		}
	}
}
