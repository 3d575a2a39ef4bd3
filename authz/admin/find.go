package admin

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"modelgate/authz"
)

// Lists page by cursor: a page is the items after the cursor in a fixed
// order, and the cursor is the last item's place in that order, so pages
// neither repeat nor skip items when others are added meanwhile.

// Page sizes of the lists.
const (
	defaultPage = 50
	maxPage     = 1000
)

// pageOf returns the items after the cursor after (from the start when
// empty), at most limit, and the cursor of the next page ("" on the last).
// order gives each item a unique, sortable place.
func pageOf[T any](items []T, order func(T) string, after string, limit int) ([]T, string, error) {
	start := 0
	if after != "" {
		b, err := base64.RawURLEncoding.DecodeString(after)
		if err != nil {
			return nil, "", badRequest("after: %q is not a cursor this list gave", after)
		}
		start, _ = slices.BinarySearchFunc(items, string(b), func(it T, k string) int { return cmp.Compare(order(it), k) })
		if start < len(items) && order(items[start]) == string(b) {
			start++
		}
	}
	end := min(start+limit, len(items))
	next := ""
	if end < len(items) {
		next = base64.RawURLEncoding.EncodeToString([]byte(order(items[end-1])))
	}
	return items[start:end], next, nil
}

// readLimit reads a page size: default when empty.
func readLimit(s string) (int, error) {
	if s == "" {
		return defaultPage, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxPage {
		return 0, badRequest("limit: want a whole number from 1 to %d, not %q", maxPage, s)
	}
	return n, nil
}

// accountFind is a search of accounts: part of a name, an order, a page.
type accountFind struct {
	// Q is part of the name, in any case.
	Q string
	// Sort is "name" (the default), "created" (newest first) or "group".
	Sort  string
	After string
	Limit int
}

var accountSorts = []string{"name", "created", "group"}

func readAccountFind(v url.Values) (accountFind, error) {
	f := accountFind{Q: strings.TrimSpace(v.Get("q")), Sort: cmp.Or(v.Get("sort"), "name"), After: v.Get("after")}
	if !slices.Contains(accountSorts, f.Sort) {
		return f, badRequest("sort: want name, created or group, not %q", f.Sort)
	}
	var err error
	f.Limit, err = readLimit(v.Get("limit"))
	return f, err
}

// query is the find as a query string, for links.
func (f accountFind) query() template.URL {
	v := url.Values{}
	if f.Q != "" {
		v.Set("q", f.Q)
	}
	if f.Sort != "name" {
		v.Set("sort", f.Sort)
	}
	if f.After != "" {
		v.Set("after", f.After)
	}
	if f.Limit != defaultPage {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	return template.URL(v.Encode()) // an encoded query: safe in a link
}

// SortQuery is the query of the first page of the same search in another
// order.
func (f accountFind) SortQuery(sort string) template.URL {
	f.Sort, f.After = sort, ""
	return f.query()
}

// findAccounts returns a page of the accounts the find matches, in its
// order, and the find of the next page (nil on the last).
func (h *Handler) findAccounts(ctx context.Context, f accountFind, groups []authz.Group) ([]authz.Account, *accountFind, error) {
	all, err := h.store.ListAccounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	if f.Q != "" {
		q := strings.ToLower(f.Q)
		all = slices.DeleteFunc(all, func(a authz.Account) bool { return !strings.Contains(strings.ToLower(a.Name), q) })
	}
	groupName := make(map[string]string, len(groups))
	for _, g := range groups {
		groupName[g.ID] = g.Name
	}
	order := func(a authz.Account) string {
		switch f.Sort {
		case "created":
			return fmt.Sprintf("%019d\x00%s", math.MaxInt64-a.CreatedAt.UnixNano(), a.ID)
		case "group":
			return groupName[a.GroupID] + "\x00" + a.Name + "\x00" + a.ID
		}
		return a.Name + "\x00" + a.ID
	}
	keys := make(map[string]string, len(all))
	for _, a := range all {
		keys[a.ID] = order(a)
	}
	slices.SortFunc(all, func(a, b authz.Account) int { return cmp.Compare(keys[a.ID], keys[b.ID]) })
	out, next, err := pageOf(all, func(a authz.Account) string { return keys[a.ID] }, f.After, f.Limit)
	if err != nil || next == "" {
		return out, nil, err
	}
	f.After = next
	return out, &f, nil
}
