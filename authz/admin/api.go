package admin

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// apiFunc handles an authenticated admin API request and returns the
// status and value to answer with, or an error to render.
type apiFunc func(r *http.Request) (int, any, error)

// maxAPIBody bounds a JSON request body.
const maxAPIBody = 1 << 20

// api requires the admin token and renders the result as JSON.
func (h *Handler) api(fn apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token := bearer(r); !h.tokenOK(token) {
			if wait := h.wrongToken(r, token); wait > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
				writeAPIError(w, tooManyWrongTokens)
				return
			}
			writeAPIError(w, unauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxAPIBody)
		r = r.WithContext(withActor(r.Context(), actorAPI))
		status, v, err := fn(r)
		if err != nil {
			writeAPIError(w, h.toAPIError(r, err))
			return
		}
		writeJSON(w, status, v)
	})
}

func (h *Handler) apiNoRoute(r *http.Request) (int, any, error) {
	return 0, nil, &apiError{Status: http.StatusNotFound, Type: "not_found_error",
		Message: fmt.Sprintf("no admin API route for %s %s", r.Method, r.URL.Path)}
}

// decode reads a JSON body strictly: unknown fields are typos to report,
// not to ignore.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("reading the JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("reading the JSON body: more than one JSON value")
	}
	return nil
}

// list is the shape of every list answer.
type list[T any] struct {
	Data []T `json:"data"`
}

func listOf[S, T any](items []S, conv func(S) T) list[T] {
	out := list[T]{Data: make([]T, 0, len(items))}
	for _, it := range items {
		out.Data = append(out.Data, conv(it))
	}
	return out
}

// pageJSON is a page of a list; NextAfter, when set, is the after of the
// next page.
type pageJSON[T any] struct {
	Data      []T     `json:"data"`
	NextAfter *string `json:"next_after"`
}

func pageJSONOf[S, T any](items []S, conv func(S) T, next string) pageJSON[T] {
	p := pageJSON[T]{Data: listOf(items, conv).Data}
	if next != "" {
		p.NextAfter = &next
	}
	return p
}

func (h *Handler) apiListGroups(r *http.Request) (int, any, error) {
	limit, err := readLimit(r.URL.Query().Get("limit"))
	if err != nil {
		return 0, nil, err
	}
	gs, err := h.store.ListGroups(r.Context())
	if err != nil {
		return 0, nil, err
	}
	order := func(g authz.Group) string { return g.Name + "\x00" + g.ID }
	slices.SortFunc(gs, func(a, b authz.Group) int { return cmp.Compare(order(a), order(b)) })
	gs, next, err := pageOf(gs, order, r.URL.Query().Get("after"), limit)
	return http.StatusOK, pageJSONOf(gs, groupOut, next), err
}

func (h *Handler) apiCreateGroup(r *http.Request) (int, any, error) {
	var b groupBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	var g authz.Group
	b.apply(&g)
	g, err := h.createGroup(r.Context(), g)
	return http.StatusCreated, groupOut(g), err
}

func (h *Handler) group(r *http.Request) (authz.Group, error) {
	g, err := h.store.GroupByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return g, fmt.Errorf("group %q: %w", r.PathValue("id"), err)
	}
	return g, nil
}

func (h *Handler) apiGroup(r *http.Request) (int, any, error) {
	g, err := h.group(r)
	return http.StatusOK, groupOut(g), err
}

func (h *Handler) apiUpdateGroup(r *http.Request) (int, any, error) {
	var b groupBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	g, err := h.group(r)
	if err != nil {
		return 0, nil, err
	}
	b.apply(&g)
	if err := h.updateGroup(r.Context(), g); err != nil {
		return 0, nil, err
	}
	return h.apiGroup(r)
}

func (h *Handler) apiListAccounts(r *http.Request) (int, any, error) {
	f, err := readAccountFind(r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	gs, err := h.store.ListGroups(r.Context())
	if err != nil {
		return 0, nil, err
	}
	as, next, err := h.findAccounts(r.Context(), f, gs)
	if err != nil {
		return 0, nil, err
	}
	after := ""
	if next != nil {
		after = next.After
	}
	return http.StatusOK, pageJSONOf(as, accountOut, after), nil
}

func (h *Handler) apiCreateAccount(r *http.Request) (int, any, error) {
	var b accountBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	var a authz.Account
	b.apply(&a)
	a, err := h.createAccount(r.Context(), a)
	return http.StatusCreated, accountOut(a), err
}

func (h *Handler) account(r *http.Request) (authz.Account, error) {
	a, err := h.store.AccountByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return a, fmt.Errorf("account %q: %w", r.PathValue("id"), err)
	}
	return a, nil
}

func (h *Handler) apiAccount(r *http.Request) (int, any, error) {
	a, err := h.account(r)
	return http.StatusOK, accountOut(a), err
}

func (h *Handler) apiUpdateAccount(r *http.Request) (int, any, error) {
	var b accountBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	a, err := h.account(r)
	if err != nil {
		return 0, nil, err
	}
	b.apply(&a)
	if err := h.updateAccount(r.Context(), a); err != nil {
		return 0, nil, err
	}
	return h.apiAccount(r)
}

func (h *Handler) apiListKeys(r *http.Request) (int, any, error) {
	if _, err := h.account(r); err != nil {
		return 0, nil, err
	}
	limit, err := readLimit(r.URL.Query().Get("limit"))
	if err != nil {
		return 0, nil, err
	}
	ks, err := h.store.ListKeys(r.Context(), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	order := func(k authz.Key) string { return fmt.Sprintf("%019d\x00%s", k.CreatedAt.UnixNano(), k.ID) }
	slices.SortFunc(ks, func(a, b authz.Key) int { return cmp.Compare(order(a), order(b)) })
	ks, next, err := pageOf(ks, order, r.URL.Query().Get("after"), limit)
	return http.StatusOK, pageJSONOf(ks, h.keyOut, next), err
}

// rotatedKey answers a rotation: the successor's secret and the old key,
// which works until its expiry.
type rotatedKey struct {
	Secret string  `json:"secret"`
	Key    keyJSON `json:"key"`
	Old    keyJSON `json:"old"`
}

func (h *Handler) apiRotateKey(r *http.Request) (int, any, error) {
	var b struct {
		// Grace is how long the old secret keeps working, as "24h".
		Grace string `json:"grace"`
	}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	grace, err := time.ParseDuration(b.Grace)
	if err != nil || grace < 0 {
		return 0, nil, badRequest("grace: want how long the old secret keeps working, as 24h, not %q", b.Grace)
	}
	secret, k, err := h.rotateKey(r.Context(), r.PathValue("id"), grace)
	if err != nil {
		return 0, nil, err
	}
	old, err := h.store.KeyByID(r.Context(), r.PathValue("id"))
	return http.StatusCreated, rotatedKey{secret, h.keyOut(k), h.keyOut(old)}, err
}

// createdKey is the one answer that holds a key's secret.
type createdKey struct {
	Secret string  `json:"secret"`
	Key    keyJSON `json:"key"`
}

func (h *Handler) apiCreateKey(r *http.Request) (int, any, error) {
	var b keyBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	k := authz.Key{AccountID: r.PathValue("id")}
	b.apply(&k)
	secret, k, err := h.issueKey(r.Context(), k)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, createdKey{secret, h.keyOut(k)}, nil
}

func (h *Handler) key(r *http.Request) (authz.Key, error) {
	k, err := h.store.KeyByID(r.Context(), r.PathValue("id"))
	if err != nil {
		return k, fmt.Errorf("key %q: %w", r.PathValue("id"), err)
	}
	return k, nil
}

func (h *Handler) apiKey(r *http.Request) (int, any, error) {
	k, err := h.key(r)
	return http.StatusOK, h.keyOut(k), err
}

func (h *Handler) apiUpdateKey(r *http.Request) (int, any, error) {
	var b keyBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	k, err := h.key(r)
	if err != nil {
		return 0, nil, err
	}
	b.apply(&k)
	if err := h.updateKey(r.Context(), k); err != nil {
		return 0, nil, err
	}
	return h.apiKey(r)
}

func (h *Handler) apiRevokeKey(r *http.Request) (int, any, error) {
	k, err := h.revokeKey(r.Context(), r.PathValue("id"))
	return http.StatusOK, h.keyOut(k), err
}

func (h *Handler) apiUsage(r *http.Request) (int, any, error) {
	q, err := apiUsageQuery(r)
	if err != nil {
		return 0, nil, err
	}
	rows, err := h.store.UsageReport(r.Context(), q)
	return http.StatusOK, listOf(rows, func(u ledger.UsageRow) usageJSON { return usageOut(u, q.By) }), err
}

// apiUsageQuery reads from and to (RFC 3339 times or YYYY-MM-DD dates, UTC;
// the range is [from, to)), account_id, key_id, model and by (a
// comma-separated list of day, account, key and model).
func apiUsageQuery(r *http.Request) (ledger.UsageQuery, error) {
	v := r.URL.Query()
	q := ledger.UsageQuery{AccountID: v.Get("account_id"), KeyID: v.Get("key_id"), Model: v.Get("model")}
	var err error
	if q.From, err = parseInstant("from", v.Get("from")); err != nil {
		return q, err
	}
	if q.To, err = parseInstant("to", v.Get("to")); err != nil {
		return q, err
	}
	q.By, err = parseBy(v["by"])
	return q, err
}

// parseInstant reads an RFC 3339 time or a YYYY-MM-DD date (midnight UTC);
// empty is the zero time.
func parseInstant(name, s string) (time.Time, error) {
	t, err := pricing.ParseInstant(s)
	if err != nil {
		return t, badRequest("%s: %v", name, err)
	}
	return t, nil
}
