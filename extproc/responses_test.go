package extproc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"modelgate/authz/ledger"
	"modelgate/authz/state"
	"modelgate/extproc/extproctest"
	"modelgate/translate/api/spec"
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
	if err := f.store.SaveResponse(context.Background(), f.account.ID, "resp_hist", state.Response{Items: items}, time.Now().Add(time.Hour)); err != nil {
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

// OpenAI backends get the Responses API passed through: the request goes
// to /v1/responses with the provider's key, usage is recorded from the
// Response (JSON) or response.completed (stream), and the client sees the
// gateway's response id.
func TestResponsesPassthroughRecordsUsage(t *testing.T) {
	f := newFixture(t, extproctest.Config{})
	since := time.Now().Add(-time.Minute)
	res := f.gw.Post(t, "/v1/responses", f.keys["valid"], `{"model":"gpt-4o","input":"Hello!"}`)
	spec.ValidateT(t, "Response", res.Body)
	up := res.Upstream["main"][0]
	if up.Path != "/v1/responses" || up.Header.Get("Authorization") != "Bearer "+providerKey || !strings.Contains(string(up.Body), `"model":"gpt-5-nano"`) {
		t.Errorf("upstream request = %s %v %s", up.Path, up.Header, up.Body)
	}
	streamed := f.gw.Post(t, "/v1/responses", f.keys["valid"], `{"model":"gpt-4o","input":"Hello!","stream":true}`)
	if streamed.Status != 200 || !strings.Contains(string(streamed.Body), "event: response.completed") {
		t.Fatalf("stream: %d %s", streamed.Status, streamed.Body)
	}
	var totals ledger.UsageTotals
	for range 50 { // records are written right after the last reply
		totals, _ = f.store.UsageSince(context.Background(), f.account.ID, since)
		if totals.Requests == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The recordings: 14 in + 8 out, and 25 in + 10 out.
	if totals.Requests != 2 || totals.PromptTokens != 39 || totals.CompletionTokens != 18 || totals.TotalTokens != 57 {
		t.Errorf("usage totals = %+v", totals)
	}
	var resp struct{ ID string }
	json.Unmarshal(res.Body, &resp)
	if _, err := f.store.Conversation(context.Background(), f.account.ID, resp.ID, time.Now()); err != nil {
		t.Errorf("the passed-through response %q was not stored: %v", resp.ID, err)
	}
}
