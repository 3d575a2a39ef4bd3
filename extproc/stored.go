package extproc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"modelgate/authz"
	"modelgate/authz/state"
	"modelgate/translate/responses"
)

// served is a request the gateway answers itself (endpointSpec.served),
// from its routing table and the store of responses: what it sees of the
// exchange.
type served struct {
	s         *Server
	endpoint  endpoint
	principal *authz.Principal
	dialect   *dialect
}

// serve answers from the path and query Envoy passed: the models the key
// may use and the responses its account stored.
func (sv served) serve(ctx context.Context, path string) ([]byte, error) {
	path, rawQuery, _ := strings.Cut(path, "?")
	query, _ := url.ParseQuery(rawQuery) // lenient, like the parameters it does not know
	switch sv.endpoint {
	case endpointModel:
		id := unescape(path[len(modelPrefix):])
		if b, ok := sv.s.getModel(sv.principal, id, sv.dialect); ok {
			return b, nil
		}
		return nil, errModelUnavailable(id)
	case endpointResponseGet:
		return sv.getResponse(ctx, unescape(path[len(responsePrefix):]), query)
	case endpointResponseDelete:
		return sv.deleteResponse(ctx, unescape(path[len(responsePrefix):]))
	case endpointInputItems:
		return sv.listInputItems(ctx, unescape(strings.TrimSuffix(path[len(responsePrefix):], inputItemsSuffix)), query)
	}
	return sv.s.listModels(sv.principal, sv.dialect), nil
}

// unescape decodes a path segment; one that is not validly escaped is
// taken as it is.
func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// errModelUnavailable is OpenAI's answer to retrieving a model that does
// not exist or that the key may not use: the two are not told apart.
func errModelUnavailable(model string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", quoted(model))}
}

// errResponseNotFound answers an id that names no stored response of the
// account: unknown, expired, deleted, stored without store, or another
// account's.
func errResponseNotFound(id string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found",
		Message: fmt.Sprintf("No response found with id '%s'.", quoted(id))}
}

// storedResponse looks a response of the principal's account up. One kept
// without its Response object (stored before the gateway kept them) can be
// continued and deleted, not retrieved.
func (sv served) storedResponse(ctx context.Context, id string) (state.Response, error) {
	if sv.s.cfg.Responses == nil {
		return state.Response{}, errResponseNotFound(id)
	}
	r, err := sv.s.cfg.Responses.Response(ctx, sv.principal.AccountID, id, sv.s.now())
	if errors.Is(err, authz.ErrNotFound) || (err == nil && r.Response == nil) {
		return state.Response{}, errResponseNotFound(id)
	}
	return r, err
}

// getResponse answers GET /v1/responses/{id} with the Response object as
// it was returned.
func (sv served) getResponse(ctx context.Context, id string, query url.Values) ([]byte, error) {
	if query.Get("stream") == "true" {
		return nil, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "stream", Code: "unsupported_value",
			Message: "The gateway does not stream stored responses again: retrieve them without 'stream'."}
	}
	r, err := sv.storedResponse(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.Response, nil
}

// deletedResponse is what DELETE /v1/responses/{id} answers.
type deletedResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

func (sv served) deleteResponse(ctx context.Context, id string) ([]byte, error) {
	if sv.s.cfg.Responses == nil {
		return nil, errResponseNotFound(id)
	}
	err := sv.s.cfg.Responses.DeleteResponse(ctx, sv.principal.AccountID, id, sv.s.now())
	if errors.Is(err, authz.ErrNotFound) {
		return nil, errResponseNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(deletedResponse{ID: id, Object: "response", Deleted: true})
}

// itemPage is the specification's ResponseItemList. An empty page (after
// the last item) has "" for first_id and last_id, which the schema
// requires as strings.
type itemPage struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID string            `json:"first_id"`
	LastID  string            `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// pageQuery is the paging of a list: limit, order and the after cursor.
type pageQuery struct {
	limit int
	desc  bool
	after string
}

// parsePageQuery reads limit (1 to 100, default 20), order (asc or desc,
// default desc) and after, with OpenAI's errors.
func parsePageQuery(q url.Values) (pageQuery, error) {
	p := pageQuery{limit: 20, desc: true, after: q.Get("after")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			return p, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "limit", Code: "invalid_type",
				Message: fmt.Sprintf("Invalid 'limit': expected an integer, but got '%s' instead.", quoted(s))}
		case n < 1:
			return p, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "limit", Code: "integer_below_min_value",
				Message: fmt.Sprintf("Invalid 'limit': integer below minimum value. Expected a value >= 1, but got %d instead.", n)}
		case n > 100:
			return p, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "limit", Code: "integer_above_max_value",
				Message: fmt.Sprintf("Invalid 'limit': integer above maximum value. Expected a value <= 100, but got %d instead.", n)}
		}
		p.limit = n
	}
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		p.desc = false
	default:
		return p, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "order", Code: "invalid_value",
			Message: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'asc' and 'desc'.", quoted(o))}
	}
	return p, nil
}

// listInputItems answers GET /v1/responses/{id}/input_items: the items
// that came before the response's output (the conversation it continued
// and its own input), one page of them.
func (sv served) listInputItems(ctx context.Context, id string, query url.Values) ([]byte, error) {
	q, err := parsePageQuery(query)
	if err != nil {
		return nil, err
	}
	r, err := sv.storedResponse(ctx, id)
	if err != nil {
		return nil, err
	}
	n := min(max(r.Inputs, 0), len(r.Items))
	items, ids := make([]json.RawMessage, n), make([]string, n)
	for i, raw := range r.Items[:n] {
		items[i], ids[i] = responses.ItemResource(raw, func(prefix string) string { return derivedID(prefix, id, i) })
	}
	if q.desc {
		slices.Reverse(items)
		slices.Reverse(ids)
	}
	start := 0
	if q.after != "" {
		i := slices.Index(ids, q.after)
		if i < 0 {
			return nil, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "after", Code: "invalid_value",
				Message: fmt.Sprintf("Invalid 'after': the response '%s' has no input item with id '%s'.", quoted(id), quoted(q.after))}
		}
		start = i + 1
	}
	end := min(start+q.limit, n)
	page := itemPage{Object: "list", Data: items[start:end], HasMore: end < n}
	if start < end {
		page.FirstID, page.LastID = ids[start], ids[end-1]
	}
	return json.Marshal(page)
}

// derivedID names an input item stored without an id, the same way every
// time: the response's id and the item's place.
func derivedID(prefix, responseID string, i int) string {
	sum := sha256.Sum256([]byte(responseID + "/" + strconv.Itoa(i)))
	return prefix + hex.EncodeToString(sum[:24])
}
