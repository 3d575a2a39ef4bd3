package extproc_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"modelgate/extproc/extproctest"
	"modelgate/translate/api/spec"
	"modelgate/translate/sse"
)

// get sends a request without a body with key.
func (f *fixture) send(t *testing.T, method, path, key string) extproctest.Result {
	t.Helper()
	req, _ := http.NewRequest(method, path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	return f.gw.Do(t, req)
}

// otherKey is a key of another account than the fixture's.
func (f *fixture) otherKey(t *testing.T) string {
	t.Helper()
	return f.mustKey(t, f.mustAccount(t, "other"), nil)
}

// create makes a stored response and returns its body and id.
func (f *fixture) create(t *testing.T, body string) ([]byte, string) {
	t.Helper()
	res := f.gw.Post(t, "/v1/responses", f.keys["valid"], body)
	var resp struct{ ID string }
	if err := json.Unmarshal(res.Body, &resp); err != nil || res.Status != 200 || resp.ID == "" {
		t.Fatalf("POST /v1/responses: %d %s", res.Status, res.Body)
	}
	return res.Body, resp.ID
}

func TestRetrieveModel(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	list := f.send(t, "GET", "/v1/models", f.keys["valid"])
	var models struct{ Data []json.RawMessage }
	if err := json.Unmarshal(list.Body, &models); err != nil {
		t.Fatal(err)
	}
	res := f.send(t, "GET", "/v1/models/gpt-4o", f.keys["valid"])
	spec.ValidateT(t, "Model", res.Body)
	if res.Status != 200 || string(res.Body) != string(models.Data[0]) || len(res.Upstream) != 0 {
		t.Errorf("GET /v1/models/gpt-4o = %d %s, want 200 and the list's entry %s", res.Status, res.Body, models.Data[0])
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content-type = %q", ct)
	}
	// An escaped id is the same model.
	if res := f.send(t, "GET", "/v1/models/gpt%2D4o", f.keys["valid"]); res.Status != 200 {
		t.Errorf("escaped id: %d %s", res.Status, res.Body)
	}
	notFound := wantError{status: 404, typ: "invalid_request_error", param: "model", code: "model_not_found"}
	for name, tt := range map[string]struct{ key, model string }{
		"not allowed to the key": {"limited", "gpt-4o-mini"},
		"unknown":                {"valid", "gpt-9"},
		"unknown with a slash":   {"valid", "org/gpt-4o"},
	} {
		t.Run(name, func(t *testing.T) {
			res := f.send(t, "GET", "/v1/models/"+tt.model, f.keys[tt.key])
			checkError(t, res, notFound)
			if !strings.Contains(string(res.Body), "`"+tt.model+"` does not exist or you do not have access to it") {
				t.Errorf("message: %s", res.Body)
			}
		})
	}
	checkError(t, f.send(t, "GET", "/v1/models/gpt-4o", ""), wantError{status: 401, typ: "authentication_error", code: "invalid_api_key"})
}

// GET returns the Response object as POST returned it; DELETE removes it,
// for GET, input_items and continuations alike.
func TestStoredResponseGetAndDelete(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	created, id := f.create(t, `{"model":"gpt-4o","input":"Hello!"}`)
	res := f.send(t, "GET", "/v1/responses/"+id, f.keys["valid"])
	spec.ValidateT(t, "Response", res.Body)
	if res.Status != 200 || !bytes.Equal(res.Body, created) || len(res.Upstream) != 0 {
		t.Errorf("GET = %d %s\nwant the created %s", res.Status, res.Body, created)
	}
	if !strings.Contains(string(res.Body), `"status":"completed"`) {
		t.Errorf("status is not completed: %s", res.Body)
	}
	// Any key of the account may retrieve it.
	if res := f.send(t, "GET", "/v1/responses/"+id+"?include[]=message.output_text.logprobs", f.keys["limited"]); res.Status != 200 {
		t.Errorf("another key of the account: %d %s", res.Status, res.Body)
	}

	del := f.send(t, "DELETE", "/v1/responses/"+id, f.keys["valid"])
	if del.Status != 200 || string(del.Body) != `{"id":"`+id+`","object":"response","deleted":true}` {
		t.Errorf("DELETE = %d %s", del.Status, del.Body)
	}
	notFound := wantError{status: 404, typ: "invalid_request_error", code: "not_found"}
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/responses/" + id}, {"GET", "/v1/responses/" + id + "/input_items"}, {"DELETE", "/v1/responses/" + id},
	} {
		res := f.send(t, tt.method, tt.path, f.keys["valid"])
		checkError(t, res, notFound)
		if !strings.Contains(string(res.Body), "No response found with id '"+id+"'.") {
			t.Errorf("%s %s after delete: %s", tt.method, tt.path, res.Body)
		}
	}
	cont := f.gw.Post(t, "/v1/responses", f.keys["valid"], `{"model":"gpt-4o","input":"Again","previous_response_id":"`+id+`"}`)
	checkError(t, cont, wantError{status: 404, typ: "invalid_request_error", param: "previous_response_id", code: "previous_response_not_found"})

	// store: false keeps nothing to retrieve.
	_, unstored := f.create(t, `{"model":"gpt-4o","input":"Hello!","store":false}`)
	checkError(t, f.send(t, "GET", "/v1/responses/"+unstored, f.keys["valid"]), notFound)
}

// A streamed response is kept as the response.completed event carried it.
func TestStoredStreamedResponse(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	stream := f.gw.Post(t, "/v1/responses", f.keys["valid"], `{"model":"gpt-4o","input":"Hello!","stream":true}`)
	var completed json.RawMessage
	var dec sse.Decoder
	for _, ev := range dec.Feed(stream.Body) {
		var done struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(ev.Data, &done) == nil && done.Type == "response.completed" {
			completed = done.Response
		}
	}
	var resp struct{ ID, Status string }
	if err := json.Unmarshal(completed, &resp); err != nil || resp.ID == "" {
		t.Fatalf("no response.completed in %d %s", stream.Status, stream.Body)
	}
	res := f.send(t, "GET", "/v1/responses/"+resp.ID, f.keys["valid"])
	spec.ValidateT(t, "Response", res.Body)
	if res.Status != 200 || !bytes.Equal(res.Body, completed) || resp.Status != "completed" {
		t.Errorf("GET = %d %s\nwant the completed event's %s", res.Status, res.Body, completed)
	}
	items := f.send(t, "GET", "/v1/responses/"+resp.ID+"/input_items", f.keys["valid"])
	spec.ValidateT(t, "ResponseItemList", items.Body)
	if items.Status != 200 || !strings.Contains(string(items.Body), `"text":"Hello!"`) {
		t.Errorf("input_items = %d %s", items.Status, items.Body)
	}
}

// Stored responses belong to their account: another account's id is a
// 404 like an unknown one, on every route, and changes nothing.
func TestStoredResponseRoutesAreAccountScoped(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	_, id := f.create(t, `{"model":"gpt-4o","input":"Hello!"}`)
	other := f.otherKey(t)
	notFound := wantError{status: 404, typ: "invalid_request_error", code: "not_found"}
	for _, ref := range []struct{ name, key, id string }{
		{"another account", other, id}, {"unknown id", f.keys["valid"], "resp_0123456789abcdef"},
	} {
		for _, tt := range []struct{ method, path string }{
			{"GET", "/v1/responses/" + ref.id}, {"GET", "/v1/responses/" + ref.id + "/input_items"}, {"DELETE", "/v1/responses/" + ref.id},
		} {
			t.Run(ref.name+" "+tt.method+" "+strings.TrimPrefix(tt.path, "/v1/responses/"+ref.id), func(t *testing.T) {
				res := f.send(t, tt.method, tt.path, ref.key)
				checkError(t, res, notFound)
				if !strings.Contains(string(res.Body), "No response found with id '"+ref.id+"'.") || len(res.Upstream) != 0 {
					t.Errorf("body %s, upstream %v", res.Body, res.Upstream)
				}
			})
		}
	}
	if res := f.send(t, "GET", "/v1/responses/"+id, f.keys["valid"]); res.Status != 200 {
		t.Errorf("the owner's GET after another account's DELETE: %d %s", res.Status, res.Body)
	}
	// Without a key it is the missing key, not the response, that fails.
	checkError(t, f.send(t, "DELETE", "/v1/responses/"+id, ""), wantError{status: 401, typ: "authentication_error", code: "invalid_api_key"})
	// Routes the gateway does not serve stay unknown URLs.
	for _, tt := range []struct{ method, path string }{
		{"POST", "/v1/responses/" + id}, {"PUT", "/v1/responses/" + id}, {"GET", "/v1/responses/"}, {"GET", "/v1/models/"},
		{"DELETE", "/v1/responses/" + id + "/input_items"}, {"GET", "/v1/responses/a/b"},
	} {
		checkError(t, f.send(t, tt.method, tt.path, f.keys["valid"]), wantError{status: 404, typ: "invalid_request_error", code: "unknown_url"})
	}
}

type itemList struct {
	Object  string `json:"object"`
	Data    []map[string]any
	FirstID string `json:"first_id"`
	LastID  string `json:"last_id"`
	HasMore bool   `json:"has_more"`
}

func (f *fixture) inputItems(t *testing.T, id, query string) itemList {
	t.Helper()
	res := f.send(t, "GET", "/v1/responses/"+id+"/input_items"+query, f.keys["valid"])
	if res.Status != 200 {
		t.Fatalf("input_items%s: %d %s", query, res.Status, res.Body)
	}
	spec.ValidateT(t, "ResponseItemList", res.Body)
	var l itemList
	if err := json.Unmarshal(res.Body, &l); err != nil || l.Object != "list" {
		t.Fatalf("input_items%s: %s", query, res.Body)
	}
	return l
}

func ids(l itemList) []string {
	var out []string
	for _, it := range l.Data {
		id, _ := it["id"].(string)
		out = append(out, id)
	}
	return out
}

// input_items lists what came before the response's output: the
// conversation it continued (inputs and outputs) and its own input, newest
// first unless order=asc, in pages after a cursor, with the same item ids
// every time and in every later response.
func TestInputItemsPaging(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	firstBody, first := f.create(t, `{"model":"gpt-4o","input":[
		{"role":"developer","content":"Be brief."},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]},
		{"role":"assistant","content":"Hello! How can I help?"},
		{"role":"user","content":"Tell me a joke."}]}`)
	var out struct {
		Output []struct{ ID string } `json:"output"`
	}
	json.Unmarshal(firstBody, &out)
	_, second := f.create(t, `{"model":"gpt-4o","input":"Another one.","previous_response_id":"`+first+`"}`)

	firstAsc := f.inputItems(t, first, "?order=asc")
	if len(firstAsc.Data) != 4 || firstAsc.HasMore {
		t.Fatalf("first response's input items: %+v", firstAsc)
	}
	// Text content becomes parts; every item gets an id and a status.
	wantTypes := []string{"input_text", "input_text", "output_text", "input_text"}
	for i, it := range firstAsc.Data {
		parts, _ := it["content"].([]any)
		part, _ := firstAsc.Data[i]["content"].([]any)
		if len(parts) != 1 || part[0].(map[string]any)["type"] != wantTypes[i] || it["status"] != "completed" || it["type"] != "message" {
			t.Errorf("item %d = %v", i, it)
		}
	}
	if firstAsc.FirstID != ids(firstAsc)[0] || firstAsc.LastID != ids(firstAsc)[3] {
		t.Errorf("first_id %q last_id %q, ids %v", firstAsc.FirstID, firstAsc.LastID, ids(firstAsc))
	}

	all := f.inputItems(t, second, "?order=asc&limit=100")
	n := 4 + len(out.Output) + 1
	if len(all.Data) != n || all.HasMore {
		t.Fatalf("second response: %d input items, want %d: %+v", len(all.Data), n, all)
	}
	// The earlier items keep their ids: the first response's input, then
	// its output as it was returned, then the new input.
	got := ids(all)
	for i, id := range ids(firstAsc) {
		if got[i] != id {
			t.Errorf("item %d: id %q in the second response, %q in the first", i, got[i], id)
		}
	}
	for i, o := range out.Output {
		if got[4+i] != o.ID {
			t.Errorf("item %d: id %q, want the first response's output %q", 4+i, got[4+i], o.ID)
		}
	}
	if parts, _ := all.Data[n-1]["content"].([]any); len(parts) != 1 || parts[0].(map[string]any)["text"] != "Another one." {
		t.Errorf("last item = %v", all.Data[n-1])
	}
	again := f.inputItems(t, second, "?order=asc&limit=100")
	if strings.Join(ids(again), ",") != strings.Join(got, ",") {
		t.Errorf("ids changed between calls: %v then %v", got, ids(again))
	}

	// Default: newest first, 20 at most.
	desc := f.inputItems(t, second, "")
	if len(desc.Data) != n || desc.FirstID != got[n-1] || desc.LastID != got[0] || desc.HasMore {
		t.Errorf("default order: first %q last %q (%d items), want %q %q", desc.FirstID, desc.LastID, len(desc.Data), got[n-1], got[0])
	}

	// Pages of two, both ways.
	for _, order := range []string{"asc", "desc"} {
		want := append([]string(nil), got...)
		if order == "desc" {
			for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
				want[i], want[j] = want[j], want[i]
			}
		}
		var paged []string
		query := "?limit=2&order=" + order
		for pages := 0; ; pages++ {
			l := f.inputItems(t, second, query)
			if len(l.Data) > 2 || len(l.Data) == 0 || l.FirstID != ids(l)[0] || l.LastID != ids(l)[len(l.Data)-1] {
				t.Fatalf("%s page %d: %+v", order, pages, l)
			}
			paged = append(paged, ids(l)...)
			if !l.HasMore {
				break
			}
			if pages > n {
				t.Fatalf("%s: has_more never ends", order)
			}
			query = "?limit=2&order=" + order + "&after=" + l.LastID
		}
		if strings.Join(paged, ",") != strings.Join(want, ",") {
			t.Errorf("%s pages: %v, want %v", order, paged, want)
		}
	}
	// After the last item: an empty page.
	if l := f.inputItems(t, second, "?order=asc&after="+got[n-1]); len(l.Data) != 0 || l.HasMore {
		t.Errorf("after the last item: %+v", l)
	}

	for _, tt := range []struct {
		query string
		want  wantError
	}{
		{"?limit=0", wantError{status: 400, typ: "invalid_request_error", param: "limit", code: "integer_below_min_value"}},
		{"?limit=101", wantError{status: 400, typ: "invalid_request_error", param: "limit", code: "integer_above_max_value"}},
		{"?limit=ten", wantError{status: 400, typ: "invalid_request_error", param: "limit", code: "invalid_type"}},
		{"?order=newest", wantError{status: 400, typ: "invalid_request_error", param: "order", code: "invalid_value"}},
		{"?after=msg_unknown", wantError{status: 400, typ: "invalid_request_error", param: "after", code: "invalid_value"}},
	} {
		checkError(t, f.send(t, "GET", "/v1/responses/"+second+"/input_items"+tt.query, f.keys["valid"]), tt.want)
	}
}

// Every answer carries one x-request-id, the gateway's own id of the
// request (the ledger's and the captures'): the gateway's own answers, its
// errors, and the provider's answers, JSON and streamed, also when the
// client sent one of its own.
func TestEveryAnswerCarriesRequestID(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	_, id := f.create(t, `{"model":"gpt-4o","input":"Hello!"}`)
	for _, tt := range []struct {
		name, method, path, key, body string
		status                        int
	}{
		{"models", "GET", "/v1/models", "valid", "", 200},
		{"model", "GET", "/v1/models/gpt-4o", "valid", "", 200},
		{"response", "GET", "/v1/responses/" + id, "valid", "", 200},
		{"input items", "GET", "/v1/responses/" + id + "/input_items", "valid", "", 200},
		{"unknown response", "GET", "/v1/responses/resp_nope", "valid", "", 404},
		{"no key", "GET", "/v1/models", "", "", 401},
		{"unknown URL", "GET", "/v1/nope", "valid", "", 404},
		{"chat", "POST", "/v1/chat/completions", "valid", chatBody, 200},
		{"chat stream", "POST", "/v1/chat/completions", "valid", strings.Replace(chatBody, `{`, `{"stream":true,`, 1), 200},
		{"responses", "POST", "/v1/responses", "valid", `{"model":"gpt-4o","input":"Hello!"}`, 200},
		{"provider error", "POST", "/v1/chat/completions", "valid", strings.Replace(chatBody, `"gpt-4o"`, `"mock-error-400"`, 1), 400},
		{"invalid request", "POST", "/v1/chat/completions", "valid", `{"model":`, 400},
		{"delete", "DELETE", "/v1/responses/" + id, "valid", "", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, sent := range []string{"", "client-chosen-id-" + strings.ReplaceAll(tt.name, " ", "-")} {
				if sent != "" && tt.name == "delete" {
					continue // deleted once
				}
				var body *strings.Reader
				if tt.body != "" {
					body = strings.NewReader(tt.body)
				}
				req, _ := http.NewRequest(tt.method, tt.path, nil)
				if body != nil {
					req, _ = http.NewRequest(tt.method, tt.path, body)
					req.Header.Set("Content-Type", "application/json")
				}
				if tt.key != "" {
					req.Header.Set("Authorization", "Bearer "+f.keys[tt.key])
				}
				if sent != "" {
					req.Header.Set("X-Request-Id", sent)
				}
				res := f.gw.Do(t, req)
				got := res.Header.Values("X-Request-Id")
				// The gateway's own id, never the client's: clients choose
				// theirs, and two may share one.
				if res.Status != tt.status || len(got) != 1 || len(got[0]) != 36 || got[0] == sent {
					t.Errorf("%d with x-request-id %q (sent %q), want %d and the gateway's one id", res.Status, got, sent, tt.status)
				}
			}
		})
	}
}
