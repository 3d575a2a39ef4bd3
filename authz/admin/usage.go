package admin

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

type grouping struct {
	name string
	by   ledger.UsageGrouping
}

// groupings are the usage report's columns by their names in forms and
// query strings.
var groupings = []grouping{{"day", ledger.ByDay}, {"account", ledger.ByAccount}, {"key", ledger.ByKey}, {"model", ledger.ByModel}}

// parseBy reads by values, each a name or a comma-separated list of them.
func parseBy(values []string) (ledger.UsageGrouping, error) {
	var by ledger.UsageGrouping
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			n := strings.TrimSpace(name)
			if n == "" {
				continue
			}
			i := slices.IndexFunc(groupings, func(g grouping) bool { return g.name == n })
			if i < 0 {
				return 0, badRequest("by: %q is not one of day, account, key, model", name)
			}
			by |= groupings[i].by
		}
	}
	return by, nil
}

// usageForm is the usage page's filter form, as submitted.
type usageForm struct {
	From, To  string // dates; To is inclusive, as people read ranges
	AccountID string
	KeyID     string
	Model     string
	By        ledger.UsageGrouping
}

// Grouped reports whether the form groups by a column, by name.
func (f usageForm) Grouped(name string) bool {
	b, _ := parseBy([]string{name})
	return f.By&b != 0
}

// Columns is how many columns the rows are grouped by.
func (f usageForm) Columns() int {
	n := 0
	for _, g := range groupings {
		if f.By&g.by != 0 {
			n++
		}
	}
	return n
}

// maxUsageDays bounds the range the usage page sums and charts.
const maxUsageDays = 366

// query reads the form into a UsageQuery. Without a range it shows the
// last 30 days; without grouping (first visit) it groups by account, key
// and model.
func (f *usageForm) query(v url.Values, now time.Time) (ledger.UsageQuery, error) {
	today := now.UTC().Truncate(24 * time.Hour)
	f.From, f.To = v.Get("from"), v.Get("to")
	f.AccountID, f.KeyID, f.Model = v.Get("account_id"), v.Get("key_id"), v.Get("model")
	if f.To == "" {
		f.To = today.Format(time.DateOnly)
	}
	to, err := time.Parse(time.DateOnly, f.To)
	if err != nil {
		return ledger.UsageQuery{}, badRequest("to: %q is not a YYYY-MM-DD date", f.To)
	}
	if f.From == "" {
		f.From = to.AddDate(0, 0, -29).Format(time.DateOnly)
	}
	from, err := time.Parse(time.DateOnly, f.From)
	if err != nil {
		return ledger.UsageQuery{}, badRequest("from: %q is not a YYYY-MM-DD date", f.From)
	}
	if to.Before(from) || to.Sub(from) >= maxUsageDays*24*time.Hour {
		return ledger.UsageQuery{}, badRequest("the range must run forward and span at most %d days", maxUsageDays)
	}
	if f.By, err = parseBy(v["by"]); err != nil {
		return ledger.UsageQuery{}, err
	}
	if v.Get("grouped") == "" {
		f.By = ledger.ByAccount | ledger.ByKey | ledger.ByModel
	}
	return ledger.UsageQuery{From: from, To: to.AddDate(0, 0, 1), AccountID: f.AccountID, KeyID: f.KeyID,
		Model: f.Model, By: f.By}, nil
}

// usageLine is a usage row with names for the ids.
type usageLine struct {
	ledger.UsageRow
	Account string
	Key     string // the key's prefix and name
}

// usageData is the usage page.
type usageData struct {
	Form     usageForm
	Accounts []authz.Account
	Keys     []authz.Key // of the selected account
	Lines    []usageLine
	Total    ledger.UsageTotals
	Chart    chart
	// Budgets are the budgets in the filter's scope, with their spending
	// this period: the selected account's, its group's and its keys', or
	// every group's and account's.
	Budgets []budgetLine
	// CSV is the query of the same rows as CSV.
	CSV template.URL
}

// budgetLine is a budget on the usage page.
type budgetLine struct {
	Kind, Name, Link string
	Spend            *spend
}

// usageFilter reads the usage form, with the accounts it offers and the
// keys of the selected account. A key filter is kept only with its own
// account selected: one left from another account would show nothing.
func (h *Handler) usageFilter(r *http.Request, d *usageData) (ledger.UsageQuery, error) {
	q, err := d.Form.query(r.URL.Query(), h.cfg.Now())
	if err != nil {
		return q, err
	}
	ctx := r.Context()
	if d.Accounts, err = h.store.ListAccounts(ctx); err != nil {
		return q, err
	}
	if q.AccountID != "" {
		if d.Keys, err = h.store.ListKeys(ctx, q.AccountID); err != nil {
			return q, err
		}
	}
	if q.KeyID != "" && !slices.ContainsFunc(d.Keys, func(k authz.Key) bool { return k.ID == q.KeyID }) {
		q.KeyID, d.Form.KeyID = "", ""
	}
	return q, nil
}

func (h *Handler) usagePage(w http.ResponseWriter, r *http.Request, v view) error {
	var d usageData
	q, err := h.usageFilter(r, &d)
	if err != nil {
		return err
	}
	ctx := r.Context()
	rows, err := h.store.UsageReport(ctx, q)
	if err != nil {
		return err
	}
	if d.Lines, err = h.usageLines(ctx, rows, d.Accounts); err != nil {
		return err
	}
	for _, l := range d.Lines {
		d.Total = addTotals(d.Total, l.UsageTotals)
	}
	if d.Budgets, err = h.budgetLines(ctx, d.Accounts, q.AccountID, d.Keys); err != nil {
		return err
	}
	d.CSV = template.URL(d.Form.values().Encode()) // an encoded query: safe in a link
	daily := q
	daily.By = ledger.ByDay
	if rows, err = h.store.UsageReport(ctx, daily); err != nil {
		return err
	}
	d.Chart = dailyChart(rows, q.From, q.To)
	h.renderPage(w, r, v, http.StatusOK, "usage", "Usage", d)
	return nil
}

// usageLines names the accounts and keys of report rows.
func (h *Handler) usageLines(ctx context.Context, rows []ledger.UsageRow, accounts []authz.Account) ([]usageLine, error) {
	names := make(map[string]string, len(accounts))
	for _, a := range accounts {
		names[a.ID] = a.Name
	}
	keys := map[string]string{}
	lines := make([]usageLine, 0, len(rows))
	for _, row := range rows {
		l := usageLine{UsageRow: row, Account: names[row.AccountID]}
		if row.KeyID != "" {
			if _, ok := keys[row.KeyID]; !ok {
				k, err := h.store.KeyByID(ctx, row.KeyID)
				if err != nil && !errors.Is(err, authz.ErrNotFound) {
					return nil, err
				}
				keys[row.KeyID] = strings.TrimSpace(k.Prefix + "… " + k.Name)
			}
			l.Key = keys[row.KeyID]
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// addTotals is a + b, each sum saturating at the int64 bounds as the
// stores' sums do (storesql.Sum): a line the store saturated stays so in
// the total instead of wrapping below zero.
func addTotals(a, b ledger.UsageTotals) ledger.UsageTotals {
	return ledger.UsageTotals{Requests: add(a.Requests, b.Requests), PromptTokens: add(a.PromptTokens, b.PromptTokens),
		CompletionTokens: add(a.CompletionTokens, b.CompletionTokens), TotalTokens: add(a.TotalTokens, b.TotalTokens),
		CachedTokens: add(a.CachedTokens, b.CachedTokens), CacheWriteTokens: add(a.CacheWriteTokens, b.CacheWriteTokens),
		CacheWrite1hTokens: add(a.CacheWrite1hTokens, b.CacheWrite1hTokens), ReasoningTokens: add(a.ReasoningTokens, b.ReasoningTokens),
		Cost: add(a.Cost, b.Cost), UnknownCost: add(a.UnknownCost, b.UnknownCost), Audio: add(a.Audio, b.Audio),
		Images: add(a.Images, b.Images), WebSearchRequests: add(a.WebSearchRequests, b.WebSearchRequests), Refused: add(a.Refused, b.Refused), Failed: add(a.Failed, b.Failed)}
}

// add is a + b, saturated to the int64 bounds.
func add[N ~int64](a, b N) N {
	switch s := a + b; {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	default:
		return s
	}
}

// values is the form as a query string.
func (f usageForm) values() url.Values {
	v := url.Values{"grouped": {"1"}, "from": {f.From}, "to": {f.To}}
	for k, s := range map[string]string{"account_id": f.AccountID, "key_id": f.KeyID, "model": f.Model} {
		if s != "" {
			v.Set(k, s)
		}
	}
	for _, g := range groupings {
		if f.By&g.by != 0 {
			v.Add("by", g.name)
		}
	}
	return v
}

// budgetLines are the budgets in scope: of the account, its group and its
// keys when one is selected, else of every group and account.
func (h *Handler) budgetLines(ctx context.Context, accounts []authz.Account, accountID string, keys []authz.Key) ([]budgetLine, error) {
	groups, err := h.store.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	var out []budgetLine
	var subjects []string
	var spends []*spend
	add := func(kind, name, link, subject string, b *authz.Budget) {
		if b != nil {
			s := &spend{Budget: *b}
			out = append(out, budgetLine{kind, name, link, s})
			subjects, spends = append(subjects, subject), append(spends, s)
		}
	}
	for _, a := range accounts {
		if accountID != "" && a.ID != accountID {
			continue
		}
		for _, g := range groups {
			if accountID != "" && g.ID == a.GroupID {
				add("group", g.Name, "/admin/groups/"+g.ID, "group:"+g.ID, g.Budget)
			}
		}
		add("account", a.Name, "/admin/accounts/"+a.ID, "account:"+a.ID, a.Budget)
	}
	if accountID == "" {
		for _, g := range groups {
			add("group", g.Name, "/admin/groups/"+g.ID, "group:"+g.ID, g.Budget)
		}
	}
	for _, k := range keys {
		add("key", strings.TrimSpace(k.Prefix+"… "+k.Name), "/admin/keys/"+k.ID, "key:"+k.ID, k.Budget)
	}
	h.readSpending(ctx, subjects, spends)
	return out, nil
}

// usageCSV answers the usage page's rows as CSV, for a spreadsheet.
func (h *Handler) usageCSV(w http.ResponseWriter, r *http.Request, _ view) error {
	var d usageData
	q, err := h.usageFilter(r, &d)
	if err != nil {
		return err
	}
	rows, err := h.store.UsageReport(r.Context(), q)
	if err != nil {
		return err
	}
	lines, err := h.usageLines(r.Context(), rows, d.Accounts)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	cw.Write([]string{"day", "account_id", "account", "key_id", "key", "model", "requests", "succeeded", "refused", "failed", //nolint:errcheck // a bytes.Buffer
		"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens",
		"cost", "currency", "unpriced_requests", "audio_seconds", "images", "cache_write_tokens",
		"cache_write_1h_tokens", "web_search_requests"})
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, l := range lines {
		day := ""
		if q.By&ledger.ByDay != 0 {
			day = l.Day.UTC().Format(time.DateOnly)
		}
		cw.Write([]string{day, l.AccountID, cell(l.Account), l.KeyID, cell(l.Key), cell(l.Model), n(l.Requests), //nolint:errcheck // a bytes.Buffer
			n(l.Succeeded()), n(l.Refused), n(l.Failed), n(l.PromptTokens), n(l.CompletionTokens), n(l.TotalTokens),
			n(l.CachedTokens), n(l.ReasoningTokens), l.Cost.String(), h.cfg.Currency, n(l.UnknownCost),
			strconv.FormatFloat(l.Audio.Seconds(), 'f', -1, 64), n(l.Images), n(l.CacheWriteTokens),
			n(l.CacheWrite1hTokens), n(l.WebSearchRequests)})
	}
	cw.Flush()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="usage-`+d.Form.From+`-to-`+d.Form.To+`.csv"`)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
	return nil
}

// cell keeps a name from being read as a formula by a spreadsheet.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
