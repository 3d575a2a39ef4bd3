package admin

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"modelgate/authz"
)

// The requests pages: the usage ledger's requests, newest first, and one
// request with its captured bodies when payload capture kept them.

// requestsData is the requests page.
type requestsData struct {
	Filter   requestFilter
	Requests []requestLine
	Accounts []authz.Account
	// Next is the query of the next page; empty on the last.
	Next template.URL
}

// requestFilter is the requests page's filter form.
type requestFilter struct {
	AccountID, KeyID, Model, Outcome string
}

// requestLine is a request with its account's name and its key's prefix.
type requestLine struct {
	authz.UsageRecord
	Account, Key string
}

// Outcome is how the request ended: ok, refused or failed.
func (l requestLine) Outcome() string {
	switch s := l.Status; {
	case s >= 200 && s < 400:
		return "ok"
	case s == 401 || s == 403 || s == 429:
		return "refused"
	}
	return "failed"
}

var outcomes = []string{"ok", "refused", "failed"}

func (h *Handler) requestsPage(w http.ResponseWriter, r *http.Request, v view) error {
	ctx := r.Context()
	qv := r.URL.Query()
	d := requestsData{Filter: requestFilter{AccountID: qv.Get("account_id"), KeyID: qv.Get("key_id"), Model: qv.Get("model"),
		Outcome: qv.Get("outcome")}}
	if d.Filter.Outcome != "" && !slices.Contains(outcomes, d.Filter.Outcome) {
		return badRequest("outcome: want ok, refused or failed, not %q", d.Filter.Outcome)
	}
	q := authz.RequestQuery{AccountID: d.Filter.AccountID, KeyID: d.Filter.KeyID, Model: d.Filter.Model, Outcome: d.Filter.Outcome, Limit: defaultPage}
	if before := qv.Get("before"); before != "" {
		ms, id, ok := strings.Cut(before, "-")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			return badRequest("before: %q is not a cursor this page gave", before)
		}
		q.BeforeAt, q.BeforeID = time.UnixMilli(n).UTC(), id
	}
	rs, err := h.store.ListRequests(ctx, q)
	if err != nil {
		return err
	}
	if d.Accounts, err = h.store.ListAccounts(ctx); err != nil {
		return err
	}
	if d.Requests, err = h.requestLines(r, rs, d.Accounts); err != nil {
		return err
	}
	if len(rs) == q.Limit {
		last := rs[len(rs)-1]
		next := url.Values{"before": {strconv.FormatInt(last.At.UnixMilli(), 10) + "-" + last.RequestID}}
		for k, s := range map[string]string{"account_id": d.Filter.AccountID, "key_id": d.Filter.KeyID, "model": d.Filter.Model, "outcome": d.Filter.Outcome} {
			if s != "" {
				next.Set(k, s)
			}
		}
		d.Next = template.URL(next.Encode()) // an encoded query: safe in a link
	}
	h.renderPage(w, r, v, http.StatusOK, "requests", "Requests", d)
	return nil
}

// requestLines names the accounts and keys of requests.
func (h *Handler) requestLines(r *http.Request, rs []authz.UsageRecord, accounts []authz.Account) ([]requestLine, error) {
	names := make(map[string]string, len(accounts))
	for _, a := range accounts {
		names[a.ID] = a.Name
	}
	keys := map[string]string{}
	out := make([]requestLine, 0, len(rs))
	for _, rec := range rs {
		if _, ok := keys[rec.KeyID]; !ok && rec.KeyID != "" {
			k, err := h.store.KeyByID(r.Context(), rec.KeyID)
			if err != nil && !errors.Is(err, authz.ErrNotFound) {
				return nil, err
			}
			keys[rec.KeyID] = k.Prefix
		}
		out = append(out, requestLine{rec, names[rec.AccountID], keys[rec.KeyID]})
	}
	return out, nil
}

// requestData is one request's page.
type requestData struct {
	Request requestLine
	// Capture is its captured bodies; nil when none was kept.
	Capture *authz.Capture
}

func (h *Handler) requestPage(w http.ResponseWriter, r *http.Request, v view) error {
	ctx := r.Context()
	id := r.PathValue("id")
	rs, err := h.store.ListRequests(ctx, authz.RequestQuery{RequestID: id, Limit: 1})
	if err != nil {
		return err
	}
	if len(rs) == 0 {
		return &apiError{Status: http.StatusNotFound, Type: "not_found_error", Message: "There is no request " + id + " in the ledger."}
	}
	accounts, err := h.store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	lines, err := h.requestLines(r, rs, accounts)
	if err != nil {
		return err
	}
	d := requestData{Request: lines[0]}
	switch c, err := h.store.CaptureOf(ctx, id); {
	case err == nil:
		d.Capture = &c
	case !errors.Is(err, authz.ErrNotFound):
		return err
	}
	h.renderPage(w, r, v, http.StatusOK, "request", "Request "+id, d)
	return nil
}
