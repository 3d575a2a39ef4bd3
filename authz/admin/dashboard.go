package admin

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// The dashboard's pages for groups, accounts and keys. Each POST redirects
// to a page (post/redirect/get), so reloading never posts again. A form the
// server refuses is shown again, with what was typed and the reason in it.

// refused reports whether err is a refusal of what a form holds (a 4xx
// other than "not found"), which the page shows in the form; it sets the
// view's Error and Form then. Other errors get the error page.
func (h *Handler) refused(r *http.Request, err error, form string, v *view) (status int, ok bool) {
	var ae *apiError
	if !errors.As(err, &ae) && !errors.Is(err, authz.ErrExists) && !errors.Is(err, errRevoked) {
		return 0, false
	}
	e := h.toAPIError(r, err)
	if e.Status < 400 || e.Status >= 500 || e.Status == http.StatusNotFound {
		return 0, false
	}
	v.Error, v.Form, v.Typed = e.Message, form, r.PostForm
	return e.Status, true
}

// groupsData is the groups page, with the new group form's values.
type groupsData struct {
	Groups []authz.Group
	New    authz.Group
}

func (h *Handler) groupsPage(w http.ResponseWriter, r *http.Request, v view) error {
	return h.renderGroups(w, r, v, http.StatusOK, authz.Group{})
}

func (h *Handler) renderGroups(w http.ResponseWriter, r *http.Request, v view, status int, typed authz.Group) error {
	gs, err := h.store.ListGroups(r.Context())
	if err != nil {
		return err
	}
	h.renderPage(w, r, v, status, "groups", "Groups", groupsData{gs, typed})
	return nil
}

// formGroup reads a group's form fields over g.
func formGroup(r *http.Request, g *authz.Group) (err error) {
	g.Name, g.Models, g.Guardrails = r.PostFormValue("name"), formModels(r), formGuardrails(r)
	if g.Limits, err = formLimits(r); err != nil {
		return err
	}
	g.Budget, err = formBudget(r)
	return err
}

func (h *Handler) groupsCreate(w http.ResponseWriter, r *http.Request, v view) error {
	var g authz.Group
	err := formGroup(r, &g)
	if err == nil {
		g, err = h.createGroup(r.Context(), g)
	}
	if status, ok := h.refused(r, err, "new-group", &v); ok {
		return h.renderGroups(w, r, v, status, g)
	}
	if err != nil {
		return err
	}
	return seeOther(w, r, "/admin/groups/"+url.PathEscape(g.ID), "created")
}

// groupData is a group's page.
type groupData struct {
	Group authz.Group
	// Spent is what the group's budget has spent this period.
	Spent *spend
}

func (h *Handler) groupPage(w http.ResponseWriter, r *http.Request, v view) error {
	g, err := h.group(r)
	if err != nil {
		return err
	}
	return h.renderGroup(w, r, v, http.StatusOK, g)
}

func (h *Handler) renderGroup(w http.ResponseWriter, r *http.Request, v view, status int, g authz.Group) error {
	stored, err := h.store.GroupByID(r.Context(), g.ID)
	if err != nil {
		return err
	}
	d := groupData{Group: g, Spent: h.spent(r.Context(), "group:"+g.ID, stored.Budget)}
	h.renderPage(w, r, v, status, "group", "Group "+stored.Name, d)
	return nil
}

func (h *Handler) groupUpdate(w http.ResponseWriter, r *http.Request, v view) error {
	g, err := h.group(r)
	if err != nil {
		return err
	}
	if err = formGroup(r, &g); err == nil {
		err = h.updateGroup(r.Context(), g)
	}
	if status, ok := h.refused(r, err, "group-settings", &v); ok {
		return h.renderGroup(w, r, v, status, g)
	}
	if err != nil {
		return err
	}
	return seeOther(w, r, "/admin/groups/"+url.PathEscape(g.ID), "saved")
}

// accountsData is the accounts page: a page of accounts, found and sorted
// as asked, with their groups.
type accountsData struct {
	Accounts []authz.Account
	Groups   []authz.Group
	Find     accountFind
	// Next is the query of the next page; empty on the last.
	Next template.URL
	// New holds the new account form's values.
	New authz.Account
}

// GroupName returns the name of a group by id.
func (d accountsData) GroupName(id string) string {
	if g := d.group(id); g != nil {
		return g.Name
	}
	return ""
}

func (d accountsData) group(id string) *authz.Group {
	for i := range d.Groups {
		if d.Groups[i].ID == id {
			return &d.Groups[i]
		}
	}
	return nil
}

func (h *Handler) accountsPage(w http.ResponseWriter, r *http.Request, v view) error {
	return h.renderAccounts(w, r, v, http.StatusOK, authz.Account{})
}

func (h *Handler) renderAccounts(w http.ResponseWriter, r *http.Request, v view, status int, typed authz.Account) error {
	d := accountsData{New: typed}
	var err error
	if d.Find, err = readAccountFind(r.URL.Query()); err != nil {
		return err
	}
	if d.Groups, err = h.store.ListGroups(r.Context()); err != nil {
		return err
	}
	var next *accountFind
	if d.Accounts, next, err = h.findAccounts(r.Context(), d.Find, d.Groups); err != nil {
		return err
	}
	if next != nil {
		d.Next = next.query()
	}
	h.renderPage(w, r, v, status, "accounts", "Accounts", d)
	return nil
}

func (h *Handler) accountsCreate(w http.ResponseWriter, r *http.Request, v view) error {
	a := authz.Account{Name: r.PostFormValue("name"), GroupID: r.PostFormValue("group_id")}
	created, err := h.createAccount(r.Context(), a)
	if status, ok := h.refused(r, err, "new-account", &v); ok {
		return h.renderAccounts(w, r, v, status, a)
	}
	if err != nil {
		return err
	}
	return seeOther(w, r, "/admin/accounts/"+url.PathEscape(created.ID), "created")
}

// accountData is an account's page.
type accountData struct {
	accountsData
	// Account is as stored, or as typed when the settings form was
	// refused; Stored is as stored.
	Account, Stored authz.Account
	// Group is the account's group, nil without one.
	Group *authz.Group
	Keys  []authz.Key
	// Usage sums the account's last 30 days.
	Usage ledger.UsageTotals
	// Effective are the models, guardrails and limits the account's keys
	// get: its own with its group's.
	Effective effective
	// Spent is what the account's budget, and its group's, have spent
	// this period.
	Spent, GroupSpent *spend
	// NewKey holds the new key form's values.
	NewKey authz.Key
}

// effective is what a principal of an account gets from its settings and
// its group's.
type effective struct {
	Models   []string
	NoModels bool
	// Guardrails are the group's and the account's, before the key's.
	Guardrails []string
	Limits     authz.Limits
}

// Allowed are the models the account's keys may be narrowed to: the
// account's effective models, or every configured one.
func (e effective) Allowed(configured []string) []string {
	if e.NoModels {
		return []string{}
	}
	if len(e.Models) == 0 {
		return configured
	}
	return e.Models
}

func effectiveOf(a authz.Account, g *authz.Group) effective {
	var gm, gg []string
	var gl authz.Limits
	if g != nil {
		gm, gg, gl = g.Models, g.Guardrails, g.Limits
	}
	m, none := authz.EffectiveModels(a.Models, gm)
	return effective{Models: m, NoModels: none, Guardrails: authz.UnionNames(gg, a.Guardrails), Limits: a.Limits.Within(gl)}
}

func (h *Handler) accountData(r *http.Request, id string) (accountData, error) {
	ctx := r.Context()
	var d accountData
	var err error
	if d.Stored, err = h.store.AccountByID(ctx, id); err != nil {
		return d, err
	}
	d.Account = d.Stored
	if d.Groups, err = h.store.ListGroups(ctx); err != nil {
		return d, err
	}
	d.Group = d.group(d.Stored.GroupID)
	d.Effective = effectiveOf(d.Stored, d.Group)
	if d.Keys, err = h.store.ListKeys(ctx, id); err != nil {
		return d, err
	}
	d.Spent = h.spent(ctx, "account:"+id, d.Stored.Budget)
	if d.Group != nil {
		d.GroupSpent = h.spent(ctx, "group:"+d.Group.ID, d.Group.Budget)
	}
	d.Usage, err = h.store.UsageSince(ctx, id, h.cfg.Now().AddDate(0, 0, -30))
	return d, err
}

func (h *Handler) accountPage(w http.ResponseWriter, r *http.Request, v view) error {
	d, err := h.accountData(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "account", "Account "+d.Stored.Name, d)
	return nil
}

func (h *Handler) accountUpdate(w http.ResponseWriter, r *http.Request, v view) error {
	a, err := h.account(r)
	if err != nil {
		return err
	}
	a.Name, a.GroupID, a.Models = r.PostFormValue("name"), r.PostFormValue("group_id"), formModels(r)
	a.Guardrails = formGuardrails(r)
	if a.Limits, err = formLimits(r); err == nil {
		if a.Budget, err = formBudget(r); err == nil {
			err = h.updateAccount(r.Context(), a)
		}
	}
	if status, ok := h.refused(r, err, "account-settings", &v); ok {
		d, err := h.accountData(r, a.ID)
		if err != nil {
			return err
		}
		d.Account = a
		h.renderPage(w, r, v, status, "account", "Account "+d.Stored.Name, d)
		return nil
	}
	if err != nil {
		return err
	}
	return seeOther(w, r, "/admin/accounts/"+url.PathEscape(a.ID), "saved")
}

// accountAction disables or enables an account (the page asks first).
func (h *Handler) accountAction(w http.ResponseWriter, r *http.Request, _ view) error {
	a, err := h.account(r)
	if err != nil {
		return err
	}
	switch action := r.PathValue("action"); action {
	case "disable", "enable":
		a.Disabled = action == "disable"
		if err := h.updateAccount(r.Context(), a); err != nil {
			return err
		}
		return seeOther(w, r, "/admin/accounts/"+url.PathEscape(a.ID), action+"d")
	}
	return &apiError{Status: http.StatusNotFound, Type: "not_found_error", Message: "There is no such action."}
}

// keyCreate issues a key and redirects to the page that shows its secret,
// once: the secret waits in this process's memory for that one page, and
// is in no URL, store or later page.
func (h *Handler) keyCreate(w http.ResponseWriter, r *http.Request, v view) error {
	k := authz.Key{AccountID: r.PathValue("id"), Name: r.PostFormValue("name"), Models: formModels(r),
		Guardrails: formGuardrails(r)}
	var err error
	var secret string
	if k.ExpiresAt, err = formTime(r, "expires_at", "Expires"); err == nil {
		if k.Budget, err = formBudget(r); err == nil {
			secret, k, err = h.issueKey(r.Context(), k)
		}
	}
	if status, ok := h.refused(r, err, "new-key", &v); ok {
		d, err := h.accountData(r, r.PathValue("id"))
		if err != nil {
			return err
		}
		d.NewKey = k
		h.renderPage(w, r, v, status, "account", "Account "+d.Stored.Name, d)
		return nil
	}
	if err != nil {
		return err
	}
	h.sessions.putFlash(h.cookie(r), k.ID, secret, h.cfg.Now())
	http.Redirect(w, r, "/admin/keys/"+url.PathEscape(k.ID)+"/created", http.StatusSeeOther)
	return nil
}

// keyCreatedPage shows a new key's secret, the first time it is asked
// for; after that it is the key's page.
func (h *Handler) keyCreatedPage(w http.ResponseWriter, r *http.Request, v view) error {
	k, err := h.key(r)
	if err != nil {
		return err
	}
	secret, ok := h.sessions.takeFlash(h.cookie(r), k.ID, h.cfg.Now())
	if !ok {
		http.Redirect(w, r, "/admin/keys/"+url.PathEscape(k.ID)+"?done=shown", http.StatusSeeOther)
		return nil
	}
	d, err := h.accountData(r, k.AccountID)
	if err != nil {
		return err
	}
	created := &createdKey{Secret: secret, Key: h.keyOut(k)}
	h.renderPage(w, r, v, http.StatusOK, "key_created", "Key created", keyCreatedData{d, created})
	return nil
}

// keyCreatedData is the page of a new key's secret.
type keyCreatedData struct {
	accountData
	Created *createdKey
}

// keyData is a key's page.
type keyData struct {
	// Key is as stored, or as typed when its settings form was refused;
	// Stored is as stored.
	Key, Stored authz.Key
	Account     authz.Account
	// Allowed are the models the key may be narrowed to.
	Allowed []string
	Spent   *spend
}

func (h *Handler) keyData(r *http.Request, k authz.Key) (keyData, error) {
	ctx := r.Context()
	d := keyData{Key: k}
	var err error
	if d.Stored, err = h.store.KeyByID(ctx, k.ID); err != nil {
		return d, err
	}
	if d.Account, err = h.store.AccountByID(ctx, k.AccountID); err != nil {
		return d, err
	}
	var g *authz.Group
	if d.Account.GroupID != "" {
		grp, err := h.store.GroupByID(ctx, d.Account.GroupID)
		if err != nil {
			return d, err
		}
		g = &grp
	}
	d.Allowed = effectiveOf(d.Account, g).Allowed(h.cfg.Models)
	d.Spent = h.spent(ctx, "key:"+k.ID, d.Stored.Budget)
	return d, nil
}

func (h *Handler) keyPage(w http.ResponseWriter, r *http.Request, v view) error {
	k, err := h.key(r)
	if err != nil {
		return err
	}
	d, err := h.keyData(r, k)
	if err != nil {
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "key", "Key "+k.Prefix+"…", d)
	return nil
}

func (h *Handler) keyUpdate(w http.ResponseWriter, r *http.Request, v view) error {
	k, err := h.key(r)
	if err != nil {
		return err
	}
	k.Name, k.Models, k.Guardrails = r.PostFormValue("name"), formModels(r), formGuardrails(r)
	if k.ExpiresAt, err = formTime(r, "expires_at", "Expires"); err == nil {
		if k.Budget, err = formBudget(r); err == nil {
			err = h.updateKey(r.Context(), k)
		}
	}
	if status, ok := h.refused(r, err, "key-settings", &v); ok {
		d, err := h.keyData(r, k)
		if err != nil {
			return err
		}
		h.renderPage(w, r, v, status, "key", "Key "+k.Prefix+"…", d)
		return nil
	}
	if err != nil {
		return err
	}
	return seeOther(w, r, "/admin/keys/"+url.PathEscape(k.ID), "saved")
}

// keyAction disables, enables, expires (now), rotates or revokes a key.
func (h *Handler) keyAction(w http.ResponseWriter, r *http.Request, _ view) error {
	action := r.PathValue("action")
	switch action {
	case "revoke":
		k, err := h.revokeKey(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		return seeOther(w, r, "/admin/keys/"+url.PathEscape(k.ID), "revoked")
	case "rotate":
		grace, err := time.ParseDuration(r.PostFormValue("grace"))
		if err != nil || grace < 0 {
			return badRequest("Choose how long the old secret keeps working.")
		}
		secret, k, err := h.rotateKey(r.Context(), r.PathValue("id"), grace)
		if err != nil {
			return err
		}
		h.sessions.putFlash(h.cookie(r), k.ID, secret, h.cfg.Now())
		http.Redirect(w, r, "/admin/keys/"+url.PathEscape(k.ID)+"/created", http.StatusSeeOther)
		return nil
	}
	k, err := h.key(r)
	if err != nil {
		return err
	}
	switch action {
	case "disable", "enable":
		k.Disabled = action == "disable"
	case "expire":
		k.ExpiresAt = new(h.cfg.Now())
	default:
		return &apiError{Status: http.StatusNotFound, Type: "not_found_error", Message: "There is no such action."}
	}
	if err := h.updateKey(r.Context(), k); err != nil {
		return err
	}
	return seeOther(w, r, "/admin/keys/"+url.PathEscape(k.ID), action+"d")
}

// formModels reads the model picker: checked boxes, or a comma-separated
// field when no models are configured.
func formModels(r *http.Request) []string {
	var out []string
	for _, v := range r.PostForm["models"] {
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

// formGuardrails reads the comma-separated names of the guardrail rules a
// level adds; empty names between commas are none.
func formGuardrails(r *http.Request) []string {
	var out []string
	for name := range strings.SplitSeq(r.PostFormValue("guardrails"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// limitFields are the form fields of authz.Limits, in its field order,
// with their labels.
var limitFields = [4]struct{ name, label string }{
	{"requests_per_minute", "Requests / minute"}, {"tokens_per_minute", "Tokens / minute"},
	{"tokens_per_day", "Tokens / day"}, {"concurrent_requests", "Concurrent requests"},
}

// formLimits reads the limit fields; an empty one is unset.
func formLimits(r *http.Request) (authz.Limits, error) {
	var vals [4]*int64
	for i, f := range limitFields {
		s := strings.TrimSpace(r.PostFormValue(f.name))
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return authz.Limits{}, badRequest("%s: %q is not a whole number of 0 or more.", f.label, s)
		}
		vals[i] = &n
	}
	return authz.Limits{RequestsPerMinute: vals[0], TokensPerMinute: vals[1], TokensPerDay: vals[2], ConcurrentRequests: vals[3]}, nil
}

// formBudget reads the budget fields; an empty amount is no budget.
func formBudget(r *http.Request) (*authz.Budget, error) {
	amount := strings.TrimSpace(r.PostFormValue("budget_amount"))
	if amount == "" {
		return nil, nil
	}
	n, err := pricing.ParseAmount(amount)
	if err != nil {
		return nil, badRequest("Budget: %q is not an amount such as 12.50.", amount)
	}
	b := &authz.Budget{Amount: n, Period: authz.Period(r.PostFormValue("budget_period")), Alerts: r.PostFormValue("budget_alerts") == "on"}
	if b.Period == authz.PeriodWindow {
		w := strings.TrimSpace(r.PostFormValue("budget_window"))
		if b.Window, err = time.ParseDuration(w); err != nil {
			return nil, badRequest("Budget window: %q is not a length of time such as 168h (a week).", w)
		}
	}
	if err := b.Validate(); err != nil {
		return nil, badRequest("Budget: %v.", err)
	}
	return b, nil
}

// formTime reads a datetime-local field as UTC (the form says so); empty
// is nil. label names the field in errors.
func formTime(r *http.Request, name, label string) (*time.Time, error) {
	s := strings.TrimSpace(r.PostFormValue(name))
	if s == "" {
		return nil, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return &t, nil
		}
	}
	return nil, badRequest("%s: %q is not a date and time.", label, s)
}

// spend is a budget's state this period, for the pages.
type spend struct {
	Budget authz.Budget
	Spent  pricing.Nanos
	// Known is false when the spending could not be read.
	Known  bool
	Renews time.Time
}

// Percent is how much of the budget is spent, 0 to 100 (and beyond).
func (s spend) Percent() int64 {
	if s.Budget.Amount == 0 {
		return 100
	}
	return int64(s.Spent) * 100 / int64(s.Budget.Amount)
}

// spent reads what a subject's budget has spent this period; nil without
// a budget.
func (h *Handler) spent(ctx context.Context, subject string, b *authz.Budget) *spend {
	if b == nil {
		return nil
	}
	s := &spend{Budget: *b}
	h.readSpending(ctx, []string{subject}, []*spend{s})
	return s
}

// readSpending fills in what budgets have spent this period, in one read;
// on failure they stay unknown, and the failure is logged.
func (h *Handler) readSpending(ctx context.Context, subjects []string, spends []*spend) {
	if h.cfg.Spent == nil || len(spends) == 0 {
		return
	}
	budgets := make([]authz.Budget, len(spends))
	for i, s := range spends {
		budgets[i] = s.Budget
	}
	n, renews, err := h.cfg.Spent(ctx, h.cfg.Now(), subjects, budgets)
	if err != nil || len(n) != len(spends) || len(renews) != len(spends) {
		h.cfg.Logger.Warn("reading budgets' spending", zap.Strings("subjects", subjects), zap.Error(err))
		return
	}
	for i, s := range spends {
		s.Spent, s.Known, s.Renews = n[i], true, renews[i]
	}
}
