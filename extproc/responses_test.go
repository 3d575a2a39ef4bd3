package extproc_test

import (
	"encoding/json"
	"testing"

	"modelgate/extproc/extproctest"
	"modelgate/translate/openai/spec"
)

// Stored responses belong to their account: another account's id is a 404
// like an unknown one.
func TestPreviousResponseIsAccountScoped(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	first := f.gw.Post(t, "/v1/responses", f.keys["valid"], `{"model":"gpt-4o","input":"Hello!"}`)
	spec.ValidateT(t, "Response", first.Body)
	var resp struct{ ID string }
	if err := json.Unmarshal(first.Body, &resp); err != nil || first.Status != 200 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	same := f.gw.Post(t, "/v1/responses", f.keys["limited"], `{"model":"gpt-4o","input":"Again","previous_response_id":"`+resp.ID+`"}`)
	if same.Status != 200 {
		t.Errorf("same account: %d %s", same.Status, same.Body)
	}
	other := f.mustAccount(t, "other")
	key := f.mustKey(t, other, nil)
	res := f.gw.Post(t, "/v1/responses", key, `{"model":"gpt-4o","input":"Again","previous_response_id":"`+resp.ID+`"}`)
	checkError(t, res, wantError{status: 404, typ: "invalid_request_error", param: "previous_response_id", code: "previous_response_not_found"})
	if len(res.Upstream) != 0 {
		t.Error("a rejected continuation reached the provider")
	}
}
