package admin

import (
	"errors"
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
	AccountID, KeyID, Model, Outcome, Guard string
}

// requestLine is a request with its account's name and its key's prefix.
type requestLine struct {
	ledger.UsageRecord
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

// AskedAs is the model name the client sent when it is not the model's
// own (an alias); empty otherwise, and for records from before aliases.
func (l requestLine) AskedAs() string {
	if l.RequestedModel == l.Model {
		return ""
	}
	return l.RequestedModel
}

// guardResults are what a guardrail rule may have done to a request, the
// values of the guard filter; the list marks the requests with any but
// the first.
var guardResults = []string{ledger.GuardAllowed, ledger.GuardBlocked, ledger.GuardMasked, ledger.GuardMonitored,
	ledger.GuardErrorOpen, ledger.GuardErrorClosed}

// GuardMarks are the results of guardResults, bar allowed, that a rule had
// for the request: what the list marks it with.
func (l requestLine) GuardMarks() []string {
	var marks []string
	for _, res := range guardResults[1:] {
		if slices.ContainsFunc(l.Guardrails, func(g ledger.GuardOutcome) bool { return g.Result == res }) {
			marks = append(marks, res)
		}
	}
	return marks
}

func (h *Handler) requestsPage(w http.ResponseWriter, r *http.Request, v view) error {
	ctx := r.Context()
	q, err := readRequestQuery(r.URL.Query())
	if err != nil {
		return err
	}
	d := requestsData{Filter: requestFilter{AccountID: q.AccountID, KeyID: q.KeyID, Model: q.Model, Outcome: q.Outcome, Guard: q.Guard}}
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
	if cursor := nextRequests(rs, q.Limit); cursor != "" {
		next := url.Values{"before": {cursor}}
		for k, s := range map[string]string{"account_id": d.Filter.AccountID, "key_id": d.Filter.KeyID, "model": d.Filter.Model,
			"outcome": d.Filter.Outcome, "guard": d.Filter.Guard} {
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
func (h *Handler) requestLines(r *http.Request, rs []ledger.UsageRecord, accounts []authz.Account) ([]requestLine, error) {
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
	Capture *ledger.Capture
}

func (h *Handler) requestPage(w http.ResponseWriter, r *http.Request, v view) error {
	ctx := r.Context()
	id := r.PathValue("id")
	rs, err := h.store.ListRequests(ctx, ledger.RequestQuery{RequestID: id, Limit: 1})
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

// requestJSON is a request of the ledger in the admin API.
type requestJSON struct {
	RequestID string `json:"request_id"`
	// ClientRequestID is the x-request-id the request came with.
	ClientRequestID string `json:"client_request_id"`
	// SessionID is the agent session the client named; empty for none.
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
	AccountID string    `json:"account_id"`
	KeyID     string    `json:"key_id"`
	Endpoint  string    `json:"endpoint"`
	// Model is the configured model the request resolved to;
	// RequestedModel the name the client sent (an alias, or the model's
	// own; empty for requests recorded before aliases), ProviderModel the
	// provider's own id of the model it was sent to.
	Model            string `json:"model"`
	RequestedModel   string `json:"requested_model"`
	ProviderModel    string `json:"provider_model"`
	Backend          string `json:"backend"`
	Status           int    `json:"status"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	TotalTokens      int64  `json:"total_tokens"`
	// CachedTokens are the prompt tokens read from the provider's cache,
	// ReasoningTokens the completion tokens spent thinking.
	CachedTokens    int64 `json:"cached_tokens"`
	ReasoningTokens int64 `json:"reasoning_tokens"`
	// CacheWriteTokens are the prompt tokens written to the provider's
	// prompt cache; CacheWrite1hTokens of them for an hour.
	CacheWriteTokens   int64 `json:"cache_write_tokens"`
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens"`
	// WebSearchRequests are the web searches the provider ran for the
	// answer.
	WebSearchRequests int64 `json:"web_search_requests"`
	Estimated         bool  `json:"estimated"`
	// Cost is a decimal string; null when the model had no price.
	Cost       *string `json:"cost"`
	DurationMS int64   `json:"duration_ms"`
	// Guardrails are what the guardrail rules that ran did, in order;
	// empty when none ran.
	Guardrails []guardJSON `json:"guardrails"`
}

// guardJSON is what one guardrail rule did to a request.
type guardJSON struct {
	Rule   string `json:"rule"`
	Phase  string `json:"phase"`
	Result string `json:"result"`
}

func requestOut(r ledger.UsageRecord) requestJSON {
	out := requestJSON{RequestID: r.RequestID, ClientRequestID: r.ClientRequestID, SessionID: r.SessionID, At: r.At, AccountID: r.AccountID, KeyID: r.KeyID, Endpoint: r.Endpoint,
		Model: r.Model, RequestedModel: r.RequestedModel, ProviderModel: r.ProviderModel, Backend: r.Backend, Status: r.Status, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		TotalTokens: r.TotalTokens, CachedTokens: r.CachedTokens, ReasoningTokens: r.ReasoningTokens, CacheWriteTokens: r.CacheWriteTokens,
		CacheWrite1hTokens: r.CacheWrite1hTokens, WebSearchRequests: r.WebSearchRequests,
		Estimated:  r.Estimated,
		DurationMS: r.Duration.Milliseconds(), Guardrails: make([]guardJSON, len(r.Guardrails))}
	for i, g := range r.Guardrails {
		out.Guardrails[i] = guardJSON(g)
	}
	if r.CostKnown {
		c := r.Cost.String()
		out.Cost = &c
	}
	return out
}

// requestsPage is a page of requests; NextBefore, when set, is the
// before of the next page.
type requestsPageJSON struct {
	Data       []requestJSON `json:"data"`
	NextBefore *string       `json:"next_before"`
}

// apiRequests lists the ledger's requests, newest first: account_id,
// key_id, model (the model or the name it was asked by), outcome (ok,
// refused, failed), guard (a guardrail result), limit, before.
func (h *Handler) apiRequests(r *http.Request) (int, any, error) {
	q, err := readRequestQuery(r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	rs, err := h.store.ListRequests(r.Context(), q)
	if err != nil {
		return 0, nil, err
	}
	out := requestsPageJSON{Data: make([]requestJSON, 0, len(rs))}
	for _, rec := range rs {
		out.Data = append(out.Data, requestOut(rec))
	}
	if next := nextRequests(rs, q.Limit); next != "" {
		out.NextBefore = &next
	}
	return http.StatusOK, out, nil
}

// requestDetailJSON is one request with its capture, null when none was
// kept.
type requestDetailJSON struct {
	requestJSON
	Capture *captureJSON `json:"capture"`
}

type captureJSON struct {
	Request           string `json:"request"`
	Response          string `json:"response"`
	RequestTruncated  bool   `json:"request_truncated"`
	ResponseTruncated bool   `json:"response_truncated"`
}

func (h *Handler) apiRequest(r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	rs, err := h.store.ListRequests(r.Context(), ledger.RequestQuery{RequestID: id, Limit: 1})
	if err != nil {
		return 0, nil, err
	}
	if len(rs) == 0 {
		return 0, nil, &apiError{Status: http.StatusNotFound, Type: "not_found_error", Message: fmt.Sprintf("request %q is not in the ledger", id)}
	}
	out := requestDetailJSON{requestJSON: requestOut(rs[0])}
	switch c, err := h.store.CaptureOf(r.Context(), id); {
	case err == nil:
		out.Capture = &captureJSON{c.Request, c.Response, c.RequestTruncated, c.ResponseTruncated}
	case !errors.Is(err, authz.ErrNotFound):
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// readRequestQuery reads the filter and page of a requests list, the
// dashboard's or the admin API's: account_id, key_id, model, outcome,
// guard, limit and before (a cursor nextRequests gave).
func readRequestQuery(qv url.Values) (ledger.RequestQuery, error) {
	q := ledger.RequestQuery{AccountID: qv.Get("account_id"), KeyID: qv.Get("key_id"), Model: qv.Get("model"), Outcome: qv.Get("outcome"),
		Guard: qv.Get("guard")}
	if q.Outcome != "" && !slices.Contains(outcomes, q.Outcome) {
		return q, badRequest("outcome: want ok, refused or failed, not %q", q.Outcome)
	}
	if q.Guard != "" && !slices.Contains(guardResults, q.Guard) {
		return q, badRequest("guard: want one of %s, not %q", strings.Join(guardResults, ", "), q.Guard)
	}
	var err error
	if q.Limit, err = readLimit(qv.Get("limit")); err != nil {
		return q, err
	}
	if before := qv.Get("before"); before != "" {
		ms, id, ok := strings.Cut(before, "-")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			return q, badRequest("before: %q is not a cursor this list gave", before)
		}
		q.BeforeAt, q.BeforeID = time.UnixMilli(n).UTC(), id
	}
	return q, nil
}

// nextRequests is the cursor of the page after rs, a full page of limit
// requests; empty after a shorter one, the last.
func nextRequests(rs []ledger.UsageRecord, limit int) string {
	if len(rs) < limit {
		return ""
	}
	last := rs[len(rs)-1]
	return strconv.FormatInt(last.At.UnixMilli(), 10) + "-" + last.RequestID
}
