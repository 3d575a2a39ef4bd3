package admin

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"modelgate/authz"
)

// The dashboard's pages for groups, accounts and keys. Each POST redirects
// back to a page (post/redirect/get), except key creation, whose answer is
// the only page that ever shows the secret.

func (h *Handler) groupsPage(w http.ResponseWriter, r *http.Request, v view) error {
	gs, err := h.store.ListGroups(r.Context())
	if err != nil {
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "groups", "Groups", gs)
	return nil
}

func (h *Handler) groupsCreate(w http.ResponseWriter, r *http.Request, _ view) error {
	g := authz.Group{Name: r.PostFormValue("name"), Models: formModels(r)}
	var err error
	if g.Limits, err = formLimits(r); err != nil {
		return err
	}
	if g, err = h.createGroup(r.Context(), g); err != nil {
		return err
	}
	return seeOther(w, r, "/admin/groups/"+url.PathEscape(g.ID), "created")
}

func (h *Handler) groupPage(w http.ResponseWriter, r *http.Request, v view) error {
	g, err := h.group(r)
	if err != nil {
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "group", "Group "+g.Name, g)
	return nil
}

func (h *Handler) groupUpdate(w http.ResponseWriter, r *http.Request, _ view) error {
	g, err := h.group(r)
	if err != nil {
		return err
	}
	g.Name, g.Models = r.PostFormValue("name"), formModels(r)
	if g.Limits, err = formLimits(r); err != nil {
		return err
	}
	if err := h.updateGroup(r.Context(), g); err != nil {
		return err
	}
	return seeOther(w, r, "/admin/groups/"+url.PathEscape(g.ID), "saved")
}

// accountsData is the accounts page: every account with its group's name.
type accountsData struct {
	Accounts []authz.Account
	Groups   []authz.Group
}

// GroupName returns the name of a group by id.
func (d accountsData) GroupName(id string) string {
	for _, g := range d.Groups {
		if g.ID == id {
			return g.Name
		}
	}
	return ""
}

func (h *Handler) accountsPage(w http.ResponseWriter, r *http.Request, v view) error {
	var d accountsData
	var err error
	if d.Accounts, err = h.store.ListAccounts(r.Context()); err != nil {
		return err
	}
	if d.Groups, err = h.store.ListGroups(r.Context()); err != nil {
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "accounts", "Accounts", d)
	return nil
}

func (h *Handler) accountsCreate(w http.ResponseWriter, r *http.Request, _ view) error {
	a, err := h.createAccount(r.Context(), authz.Account{Name: r.PostFormValue("name"), GroupID: r.PostFormValue("group_id")})
	if err != nil {
		return err
	}
	return seeOther(w, r, "/admin/accounts/"+url.PathEscape(a.ID), "created")
}

// accountData is an account's page.
type accountData struct {
	accountsData
	Account authz.Account
	Keys    []authz.Key
	// Usage sums the account's last 30 days.
	Usage authz.UsageTotals
	// Created is set on the page that answers key creation, the only one
	// that shows the secret.
	Created *createdKey
}

func (h *Handler) accountData(r *http.Request, id string) (accountData, error) {
	ctx := r.Context()
	var d accountData
	var err error
	if d.Account, err = h.store.AccountByID(ctx, id); err != nil {
		return d, err
	}
	if d.Groups, err = h.store.ListGroups(ctx); err != nil {
		return d, err
	}
	if d.Keys, err = h.store.ListKeys(ctx, id); err != nil {
		return d, err
	}
	d.Usage, err = h.store.UsageSince(ctx, id, h.cfg.Now().AddDate(0, 0, -30))
	return d, err
}

func (h *Handler) accountPage(w http.ResponseWriter, r *http.Request, v view) error {
	d, err := h.accountData(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "account", "Account "+d.Account.Name, d)
	return nil
}

func (h *Handler) accountUpdate(w http.ResponseWriter, r *http.Request, _ view) error {
	a, err := h.account(r)
	if err != nil {
		return err
	}
	a.Name, a.GroupID, a.Models = r.PostFormValue("name"), r.PostFormValue("group_id"), formModels(r)
	a.Disabled = r.PostFormValue("disabled") == "on"
	if a.Limits, err = formLimits(r); err != nil {
		return err
	}
	if err := h.updateAccount(r.Context(), a); err != nil {
		return err
	}
	return seeOther(w, r, "/admin/accounts/"+url.PathEscape(a.ID), "saved")
}

// keyCreate issues a key and answers with the page that shows its secret,
// once: the secret is in no URL, store or later page.
func (h *Handler) keyCreate(w http.ResponseWriter, r *http.Request, v view) error {
	k := authz.Key{AccountID: r.PathValue("id"), Name: r.PostFormValue("name"), Models: formModels(r)}
	var err error
	if k.ExpiresAt, err = formTime(r, "expires_at"); err != nil {
		return err
	}
	secret, k, err := h.issueKey(r.Context(), k)
	if err != nil {
		return err
	}
	d, err := h.accountData(r, k.AccountID)
	if err != nil {
		return err
	}
	d.Created = &createdKey{Secret: secret, Key: h.keyOut(k)}
	h.renderPage(w, r, v, http.StatusCreated, "key_created", "Key created", d)
	return nil
}

// keyData is a key's page.
type keyData struct {
	Key     authz.Key
	Account authz.Account
}

func (h *Handler) keyPage(w http.ResponseWriter, r *http.Request, v view) error {
	var d keyData
	var err error
	if d.Key, err = h.key(r); err != nil {
		return err
	}
	if d.Account, err = h.store.AccountByID(r.Context(), d.Key.AccountID); err != nil {
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "key", "Key "+d.Key.Prefix+"…", d)
	return nil
}

func (h *Handler) keyUpdate(w http.ResponseWriter, r *http.Request, _ view) error {
	k, err := h.key(r)
	if err != nil {
		return err
	}
	k.Name, k.Models = r.PostFormValue("name"), formModels(r)
	if k.ExpiresAt, err = formTime(r, "expires_at"); err != nil {
		return err
	}
	if err := h.updateKey(r.Context(), k); err != nil {
		return err
	}
	return seeOther(w, r, "/admin/keys/"+url.PathEscape(k.ID), "saved")
}

// keyAction disables, enables, expires (now) or revokes a key.
func (h *Handler) keyAction(w http.ResponseWriter, r *http.Request, _ view) error {
	action := r.PathValue("action")
	if action == "revoke" {
		k, err := h.revokeKey(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		return seeOther(w, r, "/admin/keys/"+url.PathEscape(k.ID), "revoked")
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

// limitFields are the form fields of authz.Limits, in its field order.
var limitFields = [4]string{"requests_per_minute", "tokens_per_minute", "tokens_per_day", "concurrent_requests"}

// formLimits reads the limit fields; an empty one is unset.
func formLimits(r *http.Request) (authz.Limits, error) {
	var vals [4]*int64
	for i, name := range limitFields {
		s := strings.TrimSpace(r.PostFormValue(name))
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return authz.Limits{}, badRequest("%s: %q is not a whole number", name, s)
		}
		vals[i] = &n
	}
	return authz.Limits{RequestsPerMinute: vals[0], TokensPerMinute: vals[1], TokensPerDay: vals[2], ConcurrentRequests: vals[3]}, nil
}

// formTime reads a datetime-local field as UTC (the form says so); empty
// is nil.
func formTime(r *http.Request, name string) (*time.Time, error) {
	s := strings.TrimSpace(r.PostFormValue(name))
	if s == "" {
		return nil, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return &t, nil
		}
	}
	return nil, badRequest("%s: %q is not a date and time", name, s)
}
