package extproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/authz/state"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
)

// countingStore counts the lookups of stored responses made through it:
// one a call, each of which is one query of the SQL stores.
type countingStore struct {
	extproc.ResponseStore
	lookups atomic.Int64
}

func (s *countingStore) Conversation(ctx context.Context, accountID, id string, now time.Time) ([]json.RawMessage, error) {
	s.lookups.Add(1)
	return s.ResponseStore.Conversation(ctx, accountID, id, now)
}

func (s *countingStore) Response(ctx context.Context, accountID, id string, now time.Time) (state.Response, error) {
	s.lookups.Add(1)
	return s.ResponseStore.Response(ctx, accountID, id, now)
}

func (s *countingStore) ResponseOutputs(ctx context.Context, accountID string, ids []string, now time.Time) (map[string][]json.RawMessage, error) {
	s.lookups.Add(1)
	return s.ResponseStore.ResponseOutputs(ctx, accountID, ids, now)
}

// counting puts a countingStore in front of the fixture's store.
func counting(cs *countingStore) func(*extproc.Config) {
	return func(c *extproc.Config) {
		cs.ResponseStore = c.Responses
		c.Responses = cs
	}
}

// saveAnswered stores a response of account whose output is a message
// and a function call, named as the bridge names them after the response
// (msg_<hex>, fc_<hex>_0), and returns the ids of the two.
func saveAnswered(t *testing.T, s state.Responses, accountID, hex, text string) (msg, call string) {
	t.Helper()
	msg, call = "msg_"+hex, "fc_"+hex+"_0"
	items := []json.RawMessage{
		json.RawMessage(`{"type":"message","id":"msg_in` + hex + `","role":"user","content":"question"}`),
		json.RawMessage(`{"type":"message","id":"` + msg + `","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}]}`),
		json.RawMessage(`{"type":"function_call","id":"` + call + `","call_id":"call_` + hex + `","name":"f","arguments":"{}"}`),
	}
	r := state.Response{Response: json.RawMessage(`{"id":"resp_` + hex + `","object":"response"}`), Items: items, Inputs: 1}
	if err := s.SaveResponse(context.Background(), accountID, "resp_"+hex, r, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return msg, call
}

func reference(id string) string { return `{"type":"item_reference","id":"` + id + `"}` }

// References to the output items of many stored responses are resolved
// with one store lookup, not one per response, beside the one of the
// conversation previous_response_id continues (whose items are not looked
// up again); a reference to another account's item is not resolved.
func TestItemReferencesResolvedInBoundedLookups(t *testing.T) {
	cs := &countingStore{}
	f := newFixture(t, extproctest.Config{}, counting(cs))
	const n = 300
	held, _ := saveAnswered(t, f.store, f.account.ID, "eeeeeeeeeeeeeeee", "answer-held.")
	refs := []string{`{"role":"user","content":"go on"}`, reference(held)}
	for i := range n {
		msg, call := saveAnswered(t, f.store, f.account.ID, fmt.Sprintf("%016x", i), fmt.Sprintf("answer-%d.", i))
		refs = append(refs, reference(msg), reference(call))
	}
	refs = append(refs, refs[2:22]...) // the same items again count once
	other := f.mustAccount(t, "other")
	otherMsg, _ := saveAnswered(t, f.store, other.ID, "ffffffffffffffff", "the other account's secret")
	refs = append(refs, reference(otherMsg))

	cs.lookups.Store(0)
	res := f.gw.Post(t, "/v1/responses", f.keys["valid"],
		`{"model":"gpt-4o","previous_response_id":"resp_eeeeeeeeeeeeeeee","input":[`+strings.Join(refs, ",")+`]}`)
	if res.Status != 200 {
		t.Fatalf("status %d: %s", res.Status, res.Body)
	}
	if got := cs.lookups.Load(); got != 2 {
		t.Errorf("%d references to %d stored responses, continuing another: %d store lookups, want 2", 2*n, n, got)
	}
	sent := string(res.Upstream["main"][0].Body)
	for i := range n {
		if !strings.Contains(sent, fmt.Sprintf("answer-%d.", i)) || !strings.Contains(sent, fmt.Sprintf(`"call_%016x"`, i)) {
			t.Fatalf("stored items of response %d not sent upstream: %.300s…", i, sent)
		}
	}
	if strings.Contains(sent, "secret") || !strings.Contains(sent, reference(otherMsg)) {
		t.Errorf("another account's item was resolved, or its reference dropped: %.300s…", sent[strings.LastIndex(sent, "item_reference")-200:])
	}
}

// A request may reference at most 10000 distinct items: past that it is
// refused before any store lookup; the same id twice counts once.
func TestItemReferencesLimit(t *testing.T) {
	cs := &countingStore{}
	f := newFixture(t, extproctest.Config{BufferLimitBytes: 4 << 20}, counting(cs),
		func(c *extproc.Config) { c.MaxRequestBodyBytes = 4 << 20 })
	refs := func(distinct, times int) string {
		var b strings.Builder
		for range times {
			for i := range distinct {
				if b.Len() > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"type":"item_reference","id":"rs_%x"}`, i)
			}
		}
		return b.String()
	}

	over := f.gw.Post(t, "/v1/responses", f.keys["valid"],
		`{"model":"gpt-4o","previous_response_id":"resp_0","input":[`+refs(10001, 1)+`]}`)
	checkError(t, over, wantError{status: 400, typ: "invalid_request_error", param: "input", code: "invalid_value"})
	if !strings.Contains(string(over.Body), "10000") {
		t.Errorf("the error does not say what the limit is: %s", over.Body)
	}
	if got := cs.lookups.Load(); got != 0 || len(over.Upstream) != 0 {
		t.Errorf("a request over the limit made %d store lookups and reached %d upstreams, want none", got, len(over.Upstream))
	}

	at := f.gw.Post(t, "/v1/responses", f.keys["valid"], `{"model":"gpt-4o","input":[`+refs(10000, 2)+`]}`)
	if at.Status != 200 {
		t.Errorf("10000 distinct references, each twice: %d %.300s", at.Status, at.Body)
	}
	if got := cs.lookups.Load(); got > 1 {
		t.Errorf("10000 distinct references: %d store lookups, want at most 1", got)
	}
}
