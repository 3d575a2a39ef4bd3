package extproc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// truncation "auto" drops the oldest stored items to fit the model's
// context window; "disabled" (the default) sends the whole conversation.
func TestResponsesTruncationAuto(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	old := strings.Repeat("oldest ", 150) // ~260 tokens
	var items []json.RawMessage
	for _, text := range []string{old, "recent question", "recent answer"} {
		b, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": text})
		items = append(items, b)
	}
	if err := f.store.SaveResponse(context.Background(), f.account.ID, "resp_hist", items, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		truncation string
		wantOldest bool
	}{{"auto", false}, {"disabled", true}} {
		res := f.gw.Post(t, "/v1/responses", f.keys["valid"],
			`{"model":"small-window","input":"next","previous_response_id":"resp_hist","truncation":"`+tt.truncation+`"}`)
		if res.Status != 200 {
			t.Fatalf("%s: %d %s", tt.truncation, res.Status, res.Body)
		}
		sent := string(res.Upstream["main"][0].Body)
		if strings.Contains(sent, "oldest") != tt.wantOldest || !strings.Contains(sent, "recent question") {
			t.Errorf("truncation %s: upstream body %.200s…", tt.truncation, sent)
		}
	}
}
