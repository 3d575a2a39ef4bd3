package admin

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

// The requests page lists the ledger's requests newest first, filters
// them, pages them, and opens one with its captured bodies, escaped.
func TestDashboardRequests(t *testing.T) {
	h, b, _ := dashboardWith(t)
	ctx := context.Background()
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	_, k, _ := authz.CreateKey(ctx, h.store, a.ID, "", nil)
	at := time.Now().UTC().Truncate(time.Millisecond)
	for i := range 60 {
		status := 200
		if i%10 == 0 {
			status = 429
		}
		// The newest (req-Ch) is a Messages API request of a Claude Code
		// session, which searched the web twice.
		endpoint, session, searches := "chat.completions", "", int64(0)
		if i == 59 {
			endpoint, session, searches = "messages", "sess-9", 2
		}
		if err := h.store.AppendUsage(ctx, ledger.UsageRecord{RequestID: "req-" + string(rune('A'+i/26)) + string(rune('a'+i%26)),
			KeyID: k.ID, AccountID: a.ID, Endpoint: endpoint, SessionID: session, Model: "gpt-4o", Status: status, TotalTokens: int64(i),
			WebSearchRequests: searches, At: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.store.SaveCaptures(ctx, []ledger.Capture{{RequestID: "req-Ch", AccountID: a.ID, Status: 200, At: at,
		Request: `{"messages":[{"content":"<script>alert(1)</script>"}]}`, Response: "data: [DONE]", ResponseTruncated: true}}); err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`<a href="/admin/requests/(req-[A-Za-z]+)">`)
	p := b.get(t, "/admin/requests")
	ids := rows.FindAllStringSubmatch(p.Body, -1)
	next := regexp.MustCompile(`href="/admin/requests\?([^"]+)" rel="next"`).FindStringSubmatch(p.Body)
	if len(ids) != 50 || ids[0][1] != "req-Ch" || next == nil { // the newest: i = 59
		t.Fatalf("first page: %d rows from %v, next %v", len(ids), ids[:1], next)
	}
	older := rows.FindAllStringSubmatch(b.get(t, "/admin/requests?"+strings.ReplaceAll(next[1], "&amp;", "&")).Body, -1)
	if len(older) != 10 || older[0][1] != "req-Aj" {
		t.Errorf("second page: %d rows from %v", len(older), older)
	}
	refused := rows.FindAllStringSubmatch(b.get(t, "/admin/requests?outcome=refused&account_id="+a.ID).Body, -1)
	if len(refused) != 6 {
		t.Errorf("refused: %d rows, want 6", len(refused))
	}
	if list := b.get(t, "/admin/requests"); !strings.Contains(list.Body, "<td>messages</td>") {
		t.Error("the requests page does not name the Messages API request's endpoint")
	}
	one := b.get(t, "/admin/requests/req-Ch")
	if !strings.Contains(one.Body, "<dt>Endpoint</dt><dd>messages</dd>") || !strings.Contains(one.Body, "<code>sess-9</code>") ||
		!strings.Contains(one.Body, "<dt>Web searches</dt><dd>2</dd>") {
		t.Errorf("the request's page does not name its endpoint, session and web searches: %s", one.Body)
	}
	if p := b.get(t, "/admin/requests/req-Cg"); strings.Contains(p.Body, "Web searches") {
		t.Error("a request without web searches lists them")
	}
	if one.StatusCode != 200 || !strings.Contains(one.Body, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(one.Body, "<script>alert") ||
		!strings.Contains(one.Body, "Answer (cut)") || !strings.Contains(one.Body, `id="captured-response">data: [DONE]`) {
		t.Errorf("the request's page: %d %s", one.StatusCode, one.Body)
	}
	if p := b.get(t, "/admin/requests/req-Aa"); !strings.Contains(p.Body, "Not captured") {
		t.Error("a request without a capture does not say so")
	}
	if p := b.get(t, "/admin/requests/nope"); p.StatusCode != 404 {
		t.Errorf("an unknown request: %d", p.StatusCode)
	}

	// The admin API: the same requests, paged by next_before, and one with
	// its capture.
	var page, rest requestsPageJSON
	h.call(t, "GET", "/admin/v1/requests?limit=40&account_id="+a.ID, nil, &page)
	if len(page.Data) != 40 || page.Data[0].RequestID != "req-Ch" || page.NextBefore == nil || page.Data[0].Cost != nil {
		t.Fatalf("API page: %d from %+v, next %v", len(page.Data), page.Data[:1], page.NextBefore)
	}
	h.call(t, "GET", "/admin/v1/requests?limit=40&before="+*page.NextBefore, nil, &rest)
	if len(rest.Data) != 20 || rest.NextBefore != nil || rest.Data[19].RequestID != "req-Aa" {
		t.Errorf("API second page: %d, next %v", len(rest.Data), rest.NextBefore)
	}
	var detail requestDetailJSON
	if st := h.call(t, "GET", "/admin/v1/requests/req-Ch", nil, &detail); st != 200 || detail.Capture == nil ||
		!strings.Contains(detail.Capture.Request, "<script>") || !detail.Capture.ResponseTruncated || detail.TotalTokens != 59 {
		t.Errorf("API request: %d %+v", st, detail)
	}
	var raw map[string]any
	if h.call(t, "GET", "/admin/v1/requests/req-Ch", nil, &raw); raw["web_search_requests"] != 2.0 {
		t.Errorf("API request's web searches: %v", raw["web_search_requests"])
	}
	var e errorBody
	if st := h.call(t, "GET", "/admin/v1/requests?outcome=maybe", nil, &e); st != 400 {
		t.Errorf("a bad outcome: %d", st)
	}
	if st := h.call(t, "GET", "/admin/v1/requests/nope", nil, &e); st != 404 {
		t.Errorf("an unknown request: %d", st)
	}
}

// The requests list marks the requests a guardrail rule blocked, masked,
// monitored or failed on, filters them by what a rule did (a result it
// does not know is a 400), keeps the filter in its pager, and a request's
// page lists its rules, their names escaped; the admin API says the same.
func TestDashboardRequestGuardrails(t *testing.T) {
	h, b, _ := dashboardWith(t)
	ctx := context.Background()
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	at := time.Now().UTC().Truncate(time.Millisecond)
	for i, rec := range []ledger.UsageRecord{
		{RequestID: "req-blocked", Status: 403, Guardrails: []ledger.GuardOutcome{
			{Rule: "<script>alert(1)</script> & co", Phase: "request", Result: ledger.GuardAllowed},
			{Rule: "jailbreak", Phase: "request", Result: ledger.GuardBlocked}}},
		{RequestID: "req-masked", Status: 200, Guardrails: []ledger.GuardOutcome{
			{Rule: "pii", Phase: "response", Result: ledger.GuardMasked},
			{Rule: "pii", Phase: "request", Result: ledger.GuardAllowed}}},
		{RequestID: "req-none", Status: 200},
	} {
		rec.AccountID, rec.Endpoint, rec.Model, rec.At = a.ID, "chat.completions", "gpt-4o", at.Add(time.Duration(i)*time.Second)
		if err := h.store.AppendUsage(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	rows := regexp.MustCompile(`(?s)<a href="/admin/requests/(req-[a-z]+)">.*?</tr>`)
	marks := regexp.MustCompile(`<span class="state guard-([a-z_]+)">`)
	list := map[string][]string{}
	for _, row := range rows.FindAllStringSubmatch(b.get(t, "/admin/requests").Body, -1) {
		list[row[1]] = nil
		for _, m := range marks.FindAllStringSubmatch(row[0], -1) {
			list[row[1]] = append(list[row[1]], m[1])
		}
	}
	if want := map[string][]string{"req-blocked": {"blocked"}, "req-masked": {"masked"}, "req-none": nil}; !reflect.DeepEqual(list, want) {
		t.Errorf("the list's guardrail marks: %v, want %v", list, want)
	}

	ids := func(path string) []string {
		t.Helper()
		var out []string
		for _, row := range rows.FindAllStringSubmatch(b.get(t, path).Body, -1) {
			out = append(out, row[1])
		}
		return out
	}
	for guard, want := range map[string][]string{"blocked": {"req-blocked"}, "masked": {"req-masked"},
		"allowed": {"req-masked", "req-blocked"}, "error_closed": nil} {
		if got := ids("/admin/requests?guard=" + guard); !reflect.DeepEqual(got, want) {
			t.Errorf("guard=%s: %v, want %v", guard, got, want)
		}
	}
	if p := b.get(t, "/admin/requests?guard=blocked"); !strings.Contains(p.Body, `<option value="blocked" selected>`) {
		t.Error("the guard filter does not show the result it filters by")
	}
	p := b.get(t, "/admin/requests?guard=allowed&limit=1")
	next := regexp.MustCompile(`href="/admin/requests\?([^"]+)" rel="next"`).FindStringSubmatch(p.Body)
	if next == nil || !strings.Contains(next[1], "guard=allowed") {
		t.Fatalf("the next page's link does not keep the guard filter: %v", next)
	}
	if got := ids("/admin/requests?" + strings.ReplaceAll(next[1], "&amp;", "&")); !reflect.DeepEqual(got, []string{"req-blocked"}) {
		t.Errorf("the next page of guard=allowed: %v", got)
	}
	for _, path := range []string{"/admin/requests?guard=maybe", "/admin/requests?guard=Blocked"} {
		if p := b.get(t, path); p.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", path, p.StatusCode)
		}
	}
	var e errorBody
	if st := h.call(t, "GET", "/admin/v1/requests?guard=request", nil, &e); st != 400 || !strings.Contains(e.Error.Message, "guard") {
		t.Errorf("API, a bad guard: %d %+v", st, e)
	}

	one := b.get(t, "/admin/requests/req-blocked")
	section := regexp.MustCompile(`(?s)<h2>Guardrails</h2>\s*<table id="guardrails">.*?<tbody>(.*?)</tbody>`).FindStringSubmatch(one.Body)
	cells := regexp.MustCompile(`<tr><td>(.*?)</td><td>(.*?)</td><td><span class="state guard-[a-z_]+">(.*?)</span></td></tr>`)
	var got [][]string
	if section != nil {
		for _, c := range cells.FindAllStringSubmatch(section[1], -1) {
			got = append(got, c[1:])
		}
	}
	want := [][]string{{"&lt;script&gt;alert(1)&lt;/script&gt; &amp; co", "request", "allowed"}, {"jailbreak", "request", "blocked"}}
	if !reflect.DeepEqual(got, want) || strings.Contains(one.Body, "<script>alert") {
		t.Errorf("the request's guardrails: %q, want %q\n%s", got, want, one.Body)
	}
	if p := b.get(t, "/admin/requests/req-none"); strings.Contains(p.Body, "Guardrails</h2>") {
		t.Error("a request no rule ran for has a guardrails section")
	}

	var page requestsPageJSON
	h.call(t, "GET", "/admin/v1/requests?guard=masked", nil, &page)
	if len(page.Data) != 1 || page.Data[0].RequestID != "req-masked" || !reflect.DeepEqual(page.Data[0].Guardrails,
		[]guardJSON{{"pii", "response", "masked"}, {"pii", "request", "allowed"}}) {
		t.Errorf("API guard=masked: %+v", page.Data)
	}
	var raw map[string]any
	if h.call(t, "GET", "/admin/v1/requests/req-none", nil, &raw); !reflect.DeepEqual(raw["guardrails"], []any{}) {
		t.Errorf("API, a request no rule ran for: guardrails %#v, want []", raw["guardrails"])
	}
	if h.call(t, "GET", "/admin/v1/requests/req-blocked", nil, &raw); !reflect.DeepEqual(raw["guardrails"].([]any)[1],
		map[string]any{"rule": "jailbreak", "phase": "request", "result": "blocked"}) {
		t.Errorf("API, a blocked request: guardrails %v", raw["guardrails"])
	}
}

// A request asked for by an alias shows the name the client sent beside
// its model, in the list and on its page, which also names the provider's
// model; the model filter finds it by either name, and the admin API
// carries both names.
func TestDashboardRequestModelNames(t *testing.T) {
	h, b, _ := dashboardWith(t)
	ctx := context.Background()
	var a accountJSON
	h.call(t, "POST", "/admin/v1/accounts", `{"name":"acme"}`, &a)
	at := time.Now().UTC().Truncate(time.Millisecond)
	for i, rec := range []ledger.UsageRecord{
		{RequestID: "req-alias", RequestedModel: "claude-sonnet-4-5-20250929", ProviderModel: "claude-sonnet-4-5-mock-agent"},
		{RequestID: "req-own", RequestedModel: "g-claude", ProviderModel: "claude-sonnet-4-5-mock-agent"},
		{RequestID: "req-old"}, // recorded before aliases: no names but the model
		{RequestID: "req-odd", RequestedModel: "<b>claude</b>", ProviderModel: "up<i>"},
	} {
		rec.AccountID, rec.Endpoint, rec.Model, rec.Backend, rec.Status = a.ID, "messages", "g-claude", "mock", 200
		rec.At = at.Add(time.Duration(i) * time.Second)
		if err := h.store.AppendUsage(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	rows := regexp.MustCompile(`(?s)<a href="/admin/requests/(req-[a-z]+)">.*?</tr>`)
	modelCell := regexp.MustCompile(`<td>(g-claude[^\n]*)</td>`)
	cells := map[string]string{}
	for _, row := range rows.FindAllStringSubmatch(b.get(t, "/admin/requests").Body, -1) {
		if m := modelCell.FindStringSubmatch(row[0]); m != nil {
			cells[row[1]] = m[1]
		}
	}
	if want := map[string]string{
		"req-alias": `g-claude <span class="hint">(asked: claude-sonnet-4-5-20250929)</span>`,
		"req-own":   "g-claude",
		"req-old":   "g-claude",
		"req-odd":   `g-claude <span class="hint">(asked: &lt;b&gt;claude&lt;/b&gt;)</span>`,
	}; !reflect.DeepEqual(cells, want) {
		t.Errorf("the list's model cells: %q, want %q", cells, want)
	}

	detail := regexp.MustCompile(`<dt>Model</dt><dd>(.*?)</dd>(?:\s*<dt>Provider model</dt><dd>(.*?)</dd>)?`)
	for id, want := range map[string][2]string{
		"req-alias": {`g-claude <span class="hint">(asked: claude-sonnet-4-5-20250929)</span> on mock`, "<code>claude-sonnet-4-5-mock-agent</code>"},
		"req-own":   {"g-claude on mock", "<code>claude-sonnet-4-5-mock-agent</code>"},
		"req-old":   {"g-claude on mock", ""},
		"req-odd":   {`g-claude <span class="hint">(asked: &lt;b&gt;claude&lt;/b&gt;)</span> on mock`, "<code>up&lt;i&gt;</code>"},
	} {
		body := b.get(t, "/admin/requests/"+id).Body
		m := detail.FindStringSubmatch(body)
		if m == nil || [2]string{m[1], m[2]} != want {
			t.Errorf("%s's page: model %q, want %q\n%s", id, m, want, body)
		}
	}

	ids := func(path string) []string {
		t.Helper()
		var out []string
		for _, row := range rows.FindAllStringSubmatch(b.get(t, path).Body, -1) {
			out = append(out, row[1])
		}
		return out
	}
	for model, want := range map[string][]string{
		"claude-sonnet-4-5-20250929":   {"req-alias"},
		"g-claude":                     {"req-odd", "req-old", "req-own", "req-alias"},
		"claude-sonnet-4-5-mock-agent": nil,
	} {
		if got := ids("/admin/requests?model=" + model); !reflect.DeepEqual(got, want) {
			t.Errorf("model=%s: %v, want %v", model, got, want)
		}
	}

	var page requestsPageJSON
	h.call(t, "GET", "/admin/v1/requests?model=claude-sonnet-4-5-20250929", nil, &page)
	if len(page.Data) != 1 || page.Data[0].RequestID != "req-alias" || page.Data[0].Model != "g-claude" ||
		page.Data[0].RequestedModel != "claude-sonnet-4-5-20250929" || page.Data[0].ProviderModel != "claude-sonnet-4-5-mock-agent" {
		t.Errorf("API model=<alias>: %+v", page.Data)
	}
	var raw map[string]any
	h.call(t, "GET", "/admin/v1/requests/req-old", nil, &raw)
	if raw["model"] != "g-claude" || raw["requested_model"] != "" || raw["provider_model"] != "" {
		t.Errorf("API, a request recorded before aliases: model %v, requested_model %#v, provider_model %#v",
			raw["model"], raw["requested_model"], raw["provider_model"])
	}
}
