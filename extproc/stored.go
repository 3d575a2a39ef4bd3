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
)

// serve answers the endpoints the gateway serves itself (endpoint.served)
// from the path and query Envoy passed: the models the key may use and the
// responses its account stored.
func (ex *exchange) serve(ctx context.Context, path string) ([]byte, error) {
	path, rawQuery, _ := strings.Cut(path, "?")
	query, _ := url.ParseQuery(rawQuery) // lenient, like the parameters it does not know
	switch ex.endpoint {
	case endpointModel:
		id := unescape(path[len(modelPrefix):])
		if b, ok := ex.s.router.get(ex.principal, id); ok {
			return b, nil
		}
		return nil, errModelUnavailable(id)
	case endpointResponseGet:
		return ex.getResponse(ctx, unescape(path[len(responsePrefix):]), query)
	case endpointResponseDelete:
		return ex.deleteResponse(ctx, unescape(path[len(responsePrefix):]))
	case endpointInputItems:
		return ex.listInputItems(ctx, unescape(strings.TrimSuffix(path[len(responsePrefix):], inputItemsSuffix)), query)
	}
	return ex.s.router.list(ex.principal), nil
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
func (ex *exchange) storedResponse(ctx context.Context, id string) (authz.StoredResponse, error) {
	if ex.s.cfg.Responses == nil {
		return authz.StoredResponse{}, errResponseNotFound(id)
	}
	r, err := ex.s.cfg.Responses.Response(ctx, ex.principal.AccountID, id, ex.s.now())
	if errors.Is(err, authz.ErrNotFound) || (err == nil && r.Response == nil) {
		return authz.StoredResponse{}, errResponseNotFound(id)
	}
	return r, err
}

// getResponse answers GET /v1/responses/{id} with the Response object as
// it was returned.
func (ex *exchange) getResponse(ctx context.Context, id string, query url.Values) ([]byte, error) {
	if query.Get("stream") == "true" {
		return nil, &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "stream", Code: "unsupported_value",
			Message: "The gateway does not stream stored responses again: retrieve them without 'stream'."}
	}
	r, err := ex.storedResponse(ctx, id)
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

func (ex *exchange) deleteResponse(ctx context.Context, id string) ([]byte, error) {
	if ex.s.cfg.Responses == nil {
		return nil, errResponseNotFound(id)
	}
	err := ex.s.cfg.Responses.DeleteResponse(ctx, ex.principal.AccountID, id, ex.s.now())
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
func (ex *exchange) listInputItems(ctx context.Context, id string, query url.Values) ([]byte, error) {
	q, err := parsePageQuery(query)
	if err != nil {
		return nil, err
	}
	r, err := ex.storedResponse(ctx, id)
	if err != nil {
		return nil, err
	}
	n := min(max(r.Inputs, 0), len(r.Items))
	items, ids := make([]json.RawMessage, n), make([]string, n)
	for i, raw := range r.Items[:n] {
		items[i], ids[i] = itemResource(raw, func(prefix string) string { return derivedID(prefix, id, i) })
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

// itemPrefix is the id prefix of an item type, as OpenAI's ids have.
func itemPrefix(typ string) string {
	switch typ {
	case "message":
		return "msg_"
	case "function_call":
		return "fc_"
	case "function_call_output":
		return "fco_"
	case "reasoning":
		return "rs_"
	}
	return "item_"
}

// derivedID names an input item stored without an id, the same way every
// time: the response's id and the item's place.
func derivedID(prefix, responseID string, i int) string {
	sum := sha256.Sum256([]byte(responseID + "/" + strconv.Itoa(i)))
	return prefix + hex.EncodeToString(sum[:24])
}

// withItemIDs gives the first n items (the input of a response about to be
// stored) the ids input_items lists them by, where they have none: messages,
// function calls and their outputs, the items a provider serving Responses
// gets replayed without ids. A message given as just a role and content
// becomes one of type message.
func withItemIDs(items []json.RawMessage, n int) []json.RawMessage {
	out := slices.Clone(items)
	for i := range min(n, len(out)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(out[i], &m) != nil || m == nil || stringOf(m["id"]) != "" {
			continue
		}
		typ := stringOf(m["type"])
		if typ == "" && m["role"] != nil {
			typ, m["type"] = "message", json.RawMessage(`"message"`)
		}
		if typ != "message" && typ != "function_call" && typ != "function_call_output" {
			continue
		}
		m["id"] = mustJSON(newID(itemPrefix(typ), 24))
		out[i] = mustJSON(m)
	}
	return out
}

// itemResource renders a stored input item as the specification's
// ItemResource: with an id (fallback makes one for an item stored without),
// a message's content as a list of parts, and a status. It returns the
// item and its id.
func itemResource(raw json.RawMessage, fallback func(prefix string) string) (json.RawMessage, string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw, ""
	}
	typ := stringOf(m["type"])
	if typ == "" && m["role"] != nil {
		typ, m["type"] = "message", json.RawMessage(`"message"`)
	}
	switch typ {
	case "message":
		m["content"] = contentParts(stringOf(m["role"]), m["content"])
		setAbsent(m, "status", `"completed"`)
	case "function_call", "function_call_output":
		setAbsent(m, "status", `"completed"`)
	case "reasoning":
		setAbsent(m, "summary", `[]`)
	}
	id := stringOf(m["id"])
	if id == "" {
		id = fallback(itemPrefix(typ))
		m["id"] = mustJSON(id)
	}
	return mustJSON(m), id
}

// contentParts is a message's content as parts: a string becomes one text
// part, input_text for the user, system and developer, output_text for the
// assistant, whose text parts get the annotations and logprobs an output
// message has.
func contentParts(role string, content json.RawMessage) json.RawMessage {
	assistant := role == "assistant"
	var s string
	if json.Unmarshal(content, &s) == nil {
		if assistant {
			return mustJSON([]map[string]any{{"type": "output_text", "text": s, "annotations": []any{}, "logprobs": []any{}}})
		}
		return mustJSON([]map[string]any{{"type": "input_text", "text": s}})
	}
	var parts []map[string]json.RawMessage
	if !assistant || json.Unmarshal(content, &parts) != nil {
		return content
	}
	for _, p := range parts {
		switch stringOf(p["type"]) {
		case "input_text":
			p["type"] = json.RawMessage(`"output_text"`)
			fallthrough
		case "output_text":
			setAbsent(p, "annotations", `[]`)
			setAbsent(p, "logprobs", `[]`)
		}
	}
	return mustJSON(parts)
}

// stringOf is a JSON string's value, "" for anything else.
func stringOf(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s) //nolint:errcheck // not a string is ""
	return s
}

func setAbsent(m map[string]json.RawMessage, key, value string) {
	if _, ok := m[key]; !ok {
		m[key] = json.RawMessage(value)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: decoded JSON and plain values only
		panic(err)
	}
	return b
}
