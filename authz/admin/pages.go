package admin

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

// maxFormBytes bounds a dashboard form; they hold a few short fields.
const maxFormBytes = 64 << 10

// view is what every page's template gets besides its own data.
type view struct {
	// CSRF is the token every form posts back.
	CSRF     string
	SignedIn bool
	// Models are the configured model ids, for the model pickers.
	Models []string
	// Notice is a confirmation such as "Key revoked.", after a redirect.
	Notice string
	// Error is why the server refused the form whose id is Form; the
	// page shows it in that form, which keeps what was typed.
	Error, Form string
	// Typed is what that form posted.
	Typed url.Values
	// Currency is the unit of prices, costs and budgets.
	Currency string
}

// pageFunc handles a dashboard request of a signed-in browser. An error
// is rendered as an error page.
type pageFunc func(w http.ResponseWriter, r *http.Request, v view) error

// errStaleForm refuses a POST without its session's CSRF token.
var errStaleForm = &apiError{Status: http.StatusForbidden, Type: "permission_error",
	Message: "This form is stale or was not sent by this dashboard: reload the page and try again."}

// page requires a session, and on POST the session's CSRF token.
func (h *Handler) page(fn pageFunc) http.Handler {
	return h.dashboard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := h.cookie(r)
		if !h.sessions.valid(c, h.cfg.Now()) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
				return
			}
			h.renderError(w, r, view{}, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error",
				Message: "Your session has ended: sign in again."})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if !h.sessions.csrfOK(c, r.PostFormValue("csrf")) {
				h.renderError(w, r, view{}, errStaleForm)
				return
			}
		}
		r = r.WithContext(withActor(r.Context(), sessionActor(c)))
		v := view{CSRF: h.sessions.csrfToken(c), SignedIn: true, Models: h.cfg.Models, Notice: notices[r.URL.Query().Get("done")],
			Currency: h.cfg.Currency}
		if err := fn(w, r, v); err != nil {
			h.renderError(w, r, v, err)
		}
	}))
}

// notices are the confirmations a redirect can ask for with ?done=.
var notices = map[string]string{
	"created": "Created.", "saved": "Saved.", "disabled": "Disabled.", "enabled": "Enabled.",
	"revoked": "Key revoked: it no longer authenticates.", "expired": "Key expired: it no longer authenticates.",
	"shown":   "This key's secret was shown once, when it was made, and cannot be shown again.",
	"deleted": "Deleted.",
}

// seeOther redirects after a successful POST, so reloading does not post
// again.
func seeOther(w http.ResponseWriter, r *http.Request, path, done string) error {
	http.Redirect(w, r, path+"?done="+done, http.StatusSeeOther)
	return nil
}

// pageData is the root of every template.
type pageData struct {
	view
	Title string
	Data  any
}

// renderPage renders a page template. The page is executed into a buffer
// first, so a template error becomes a 500 rather than half a page.
func (h *Handler) renderPage(w http.ResponseWriter, r *http.Request, v view, status int, name, title string, data any) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", pageData{v, title, data}); err != nil {
		h.renderError(w, r, v, fmt.Errorf("rendering %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// renderError renders the error page; it is the one place dashboard errors
// are shown.
func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, v view, err error) {
	e := h.toAPIError(r, err)
	var buf bytes.Buffer
	if err := h.pages["error"].ExecuteTemplate(&buf, "layout", pageData{v, http.StatusText(e.Status), e}); err != nil {
		http.Error(w, e.Message, e.Status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(e.Status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

func (h *Handler) home(w http.ResponseWriter, r *http.Request, _ view) error {
	http.Redirect(w, r, "/admin/accounts", http.StatusSeeOther)
	return nil
}

func (h *Handler) noPage(http.ResponseWriter, *http.Request, view) error {
	return &apiError{Status: http.StatusNotFound, Type: "not_found_error", Message: "There is no such page."}
}

// pageNames are the templates under templates/, each executed with
// layout.html and parts.html.
var pageNames = []string{"login", "error", "groups", "group", "accounts", "account", "key", "key_created", "usage", "prices", "audit", "requests", "request"}

func parsePages(funcs template.FuncMap) (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, err
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFiles, "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// funcs are the templates' helpers.
func (h *Handler) funcs() template.FuncMap {
	return template.FuncMap{
		"when":     formatTime,
		"models":   func(m []string) string { return cmp.Or(strings.Join(m, ", "), "all") },
		"limit":    formatLimit,
		"num":      formatNum,
		"cost":     func(t ledger.UsageTotals) string { return formatCost(t, h.cfg.Currency) },
		"keyState": func(k authz.Key) string { return keyState(k, h.cfg.Now()) },
		"picker":   newPicker,
		"refusal": func(p pageData, form string) string {
			if p.Form == form {
				return p.Error
			}
			return ""
		},
		"limitsForm": func(l, inherited authz.Limits, hint string) limitsForm { return limitsForm{l, inherited, hint} },
		"budgetForm": func(b *authz.Budget, s *spend, currency, hint, id string) budgetForm {
			f := budgetForm{Period: "month", Currency: currency, Hint: hint, Spend: s, ID: id}
			if b != nil {
				f.Amount, f.Period, f.Alerts = b.Amount.String(), string(b.Period), b.Alerts
				if b.Window != 0 {
					f.Window = b.Window.String()
				}
			}
			return f
		},
		"period": periodText,
		"effectiveKeyState": func(k authz.Key, accountDisabled bool) keyStateView {
			return effectiveKeyState(k, accountDisabled, h.cfg.Now())
		},
		"keyRows": func(keys []authz.Key, accountDisabled bool, currency string) any {
			return struct {
				Keys            []authz.Key
				AccountDisabled bool
				Currency        string
			}{keys, accountDisabled, currency}
		},
		"fromInput": fromInput,
		"limits":    limitsText,
		"ruleNames": func(n []string) string { return cmp.Or(strings.Join(n, ", "), "none") },
		"typedBudget": func(p pageData, form string, f budgetForm) budgetForm {
			if p.Form != form || p.Typed == nil {
				return f
			}
			f.Amount, f.Period, f.Window = p.Typed.Get("budget_amount"), p.Typed.Get("budget_period"), p.Typed.Get("budget_window")
			f.Alerts = p.Typed.Get("budget_alerts") == "on"
			return f
		},
		"narrowed": func(p picker, none string) picker { p.None = none; return p },
		"join":     func(m []string) string { return strings.Join(m, ", ") },
		"noLimits": func() authz.Limits { return authz.Limits{} },
		"groupChoice": func(groups []authz.Group, selected string) any {
			return struct {
				Groups   []authz.Group
				Selected string
			}{groups, selected}
		},
		"inputTime": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02T15:04")
		},
	}
}

// formatTime shows a time to the minute in UTC; nil is "never".
func formatTime(t any) string {
	switch t := t.(type) {
	case time.Time:
		return t.UTC().Format("2006-01-02 15:04 UTC")
	case *time.Time:
		if t != nil {
			return t.UTC().Format("2006-01-02 15:04 UTC")
		}
	}
	return "never"
}

func formatLimit(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

// formatNum groups digits by thousands: 1234567 is 1,234,567.
// formatCost is what usage cost in currency: the sum of the known costs,
// with how many requests had none, or "no price" when none had one.
func formatCost(t ledger.UsageTotals, currency string) string {
	if t.UnknownCost > 0 && t.UnknownCost == t.Requests {
		return "no price"
	}
	s := currency + " " + t.Cost.String()
	if t.UnknownCost > 0 {
		s += " (" + formatNum(t.UnknownCost) + " without a price)"
	}
	return s
}

func formatNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// keyState is how a key stands now.
func keyState(k authz.Key, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired"
	case k.Disabled:
		return "disabled"
	}
	return "active"
}

// picker is a model picker: a checkbox per known model, the selected ones
// checked. Selected models the configuration no longer has are listed too,
// so saving the form does not drop them unseen.
type picker struct {
	// Free is set when no models are configured: the picker is then a
	// comma-separated text field.
	Free     bool
	Known    []string
	Selected []string
	// None says what checking nothing means.
	None string
}

func newPicker(known, selected []string) picker {
	all := slices.Clone(known)
	for _, m := range selected {
		if !slices.Contains(all, m) {
			all = append(all, m)
		}
	}
	return picker{Free: known == nil, Known: all, Selected: selected, None: "no narrowing at this level."}
}

// Has reports whether a model is selected.
func (p picker) Has(m string) bool { return slices.Contains(p.Selected, m) }

// limitsForm is the limit fields: the values set at this level and those
// inherited from above, shown as placeholders.
type limitsForm struct {
	Limits, Inherited authz.Limits
	Hint              string
}

// Placeholder is what an empty field means: the inherited limit, or none.
func (limitsForm) Placeholder(inherited *int64) string {
	if inherited == nil {
		return "no limit"
	}
	return "inherits " + formatNum(*inherited)
}

// budgetForm is the budget fields, as stored or as typed.
type budgetForm struct {
	Amount, Period, Window string
	Alerts                 bool
	Currency, Hint, ID     string
	Spend                  *spend
}

// periodText names a budget's period: "per month", "per day", "per 168h0m0s".
func periodText(b authz.Budget) string {
	switch b.Period {
	case authz.PeriodDay:
		return "per day"
	case authz.PeriodMonth:
		return "per month"
	}
	return "per " + b.Window.String()
}

// keyStateView is a key's state as its account makes it: an active key of
// a disabled account is refused too.
type keyStateView struct{ Class, Text string }

func effectiveKeyState(k authz.Key, accountDisabled bool, now time.Time) keyStateView {
	s := keyState(k, now)
	if s == "active" && accountDisabled {
		return keyStateView{"disabled", "disabled (account)"}
	}
	return keyStateView{s, s}
}

// limitsText lists the limits set, or says there are none.
func limitsText(l authz.Limits) string {
	var parts []string
	for _, f := range []struct {
		v    *int64
		unit string
	}{{l.RequestsPerMinute, "requests/min"}, {l.TokensPerMinute, "tokens/min"}, {l.TokensPerDay, "tokens/day"},
		{l.ConcurrentRequests, "concurrent requests"}} {
		if f.v != nil {
			parts = append(parts, formatNum(*f.v)+" "+f.unit)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
