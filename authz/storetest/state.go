package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
	"modelgate/authz/state"
)

// Responses tests state.Responses.
func Responses[S state.Responses](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore,
		test[S]{"Responses", testResponses[S]},
		test[S]{"ResponseObjects", testResponseObjects[S]},
		test[S]{"ResponseOutputs", testResponseOutputs[S]},
	)
}

// Images tests state.Images.
func Images[S state.Images](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore, test[S]{"Images", testImages[S]})
}

func testResponses[S state.Responses](t *testing.T, s S) {
	ctx := context.Background()
	now := time.Now()
	// Kept as sent, bar insignificant spaces: key order is the client's.
	items := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"hi"}`),
		json.RawMessage(`{"type": "message", "role":"assistant", "content" : [{"z":1,"a":2}]}`)}
	if err := s.SaveResponse(ctx, "acct_a", "resp_1", state.Response{Items: items}, now.Add(time.Hour)); err != nil {
		t.Fatalf("SaveResponse: %v", err)
	}
	got, err := s.Conversation(ctx, "acct_a", "resp_1", now)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	if diff := cmp.Diff(rawStrings(items), rawStrings(got)); diff != "" {
		t.Errorf("Conversation (-saved +got):\n%s", diff)
	}
	if err := s.SaveResponse(ctx, "acct_b", "resp_1", state.Response{Items: items}, now.Add(time.Hour)); !errors.Is(err, authz.ErrExists) {
		t.Errorf("SaveResponse(same id) error = %v, want ErrExists", err)
	}
	// Already expired when saved: the save itself prunes it.
	if err := s.SaveResponse(ctx, "acct_a", "resp_old", state.Response{Items: items}, now.Add(-time.Minute)); err != nil {
		t.Fatalf("SaveResponse: %v", err)
	}
	for name, lookup := range map[string]func() error{
		"another account": func() error { _, err := s.Conversation(ctx, "acct_b", "resp_1", now); return err },
		"unknown id":      func() error { _, err := s.Conversation(ctx, "acct_a", "resp_2", now); return err },
		"expired":         func() error { _, err := s.Conversation(ctx, "acct_a", "resp_1", now.Add(time.Hour)); return err },
		"pruned":          func() error { _, err := s.Conversation(ctx, "acct_a", "resp_old", now.Add(-time.Hour)); return err },
	} {
		if err := lookup(); !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s: error = %v, want ErrNotFound", name, err)
		}
	}
}

// testResponseObjects covers what GET, DELETE and input_items of stored
// responses need: the Response object and the number of input items kept
// beside the conversation, and deletion, all scoped to the account.
func testResponseObjects[S state.Responses](t *testing.T, s S) {
	ctx := context.Background()
	now := time.Now()
	want := state.Response{
		Response: json.RawMessage(`{"id":"resp_obj","object":"response","status":"completed","output":[{"z":1,"a":2}]}`),
		Items: []json.RawMessage{json.RawMessage(`{"type":"message","id":"msg_1","role":"user","content":"hi"}`),
			json.RawMessage(`{"type":"message","id":"msg_2","role":"assistant","content":[{"type":"output_text","text":"hello"}]}`)},
		Inputs: 1,
	}
	if err := s.SaveResponse(ctx, "acct_a", "resp_obj", want, now.Add(time.Hour)); err != nil {
		t.Fatalf("SaveResponse: %v", err)
	}
	got, err := s.Response(ctx, "acct_a", "resp_obj", now)
	if err != nil {
		t.Fatalf("Response: %v", err)
	}
	if string(got.Response) != string(want.Response) || got.Inputs != 1 {
		t.Errorf("Response = %s with %d inputs, want %s with 1", got.Response, got.Inputs, want.Response)
	}
	if diff := cmp.Diff(rawStrings(want.Items), rawStrings(got.Items)); diff != "" {
		t.Errorf("Response items (-saved +got):\n%s", diff)
	}

	// A conversation kept without its Response object, as before the
	// gateway kept them: it is found, with no object and no inputs.
	legacy := state.Response{Items: want.Items, Inputs: 1}
	if err := s.SaveResponse(ctx, "acct_a", "resp_legacy", legacy, now.Add(time.Hour)); err != nil {
		t.Fatalf("SaveResponse(no object): %v", err)
	}
	if got, err := s.Response(ctx, "acct_a", "resp_legacy", now); err != nil || got.Response != nil || got.Inputs != 0 || len(got.Items) != 2 {
		t.Errorf("Response(no object) = %s, %d inputs, %d items, %v; want no object, 0 inputs, 2 items", got.Response, got.Inputs, len(got.Items), err)
	}

	for name, lookup := range map[string]func() error{
		"another account":           func() error { _, err := s.Response(ctx, "acct_b", "resp_obj", now); return err },
		"unknown id":                func() error { _, err := s.Response(ctx, "acct_a", "resp_none", now); return err },
		"expired":                   func() error { _, err := s.Response(ctx, "acct_a", "resp_obj", now.Add(time.Hour)); return err },
		"delete by another account": func() error { return s.DeleteResponse(ctx, "acct_b", "resp_obj", now) },
		"delete unknown id":         func() error { return s.DeleteResponse(ctx, "acct_a", "resp_none", now) },
		"delete expired":            func() error { return s.DeleteResponse(ctx, "acct_a", "resp_obj", now.Add(time.Hour)) },
	} {
		if err := lookup(); !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s: error = %v, want ErrNotFound", name, err)
		}
	}
	// None of those removed it.
	if _, err := s.Response(ctx, "acct_a", "resp_obj", now); err != nil {
		t.Fatalf("Response after failed deletes: %v", err)
	}

	if err := s.DeleteResponse(ctx, "acct_a", "resp_obj", now); err != nil {
		t.Fatalf("DeleteResponse: %v", err)
	}
	for name, lookup := range map[string]func() error{
		"Response":       func() error { _, err := s.Response(ctx, "acct_a", "resp_obj", now); return err },
		"Conversation":   func() error { _, err := s.Conversation(ctx, "acct_a", "resp_obj", now); return err },
		"DeleteResponse": func() error { return s.DeleteResponse(ctx, "acct_a", "resp_obj", now) },
	} {
		if err := lookup(); !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s after delete: error = %v, want ErrNotFound", name, err)
		}
	}
	// Deleting one response leaves the others.
	if _, err := s.Conversation(ctx, "acct_a", "resp_legacy", now); err != nil {
		t.Errorf("Conversation of another response after delete: %v", err)
	}
}

// testResponseOutputs covers the lookup of item_references: the outputs
// of many stored responses at once, of the account's alone.
func testResponseOutputs[S state.Responses](t *testing.T, s S) {
	ctx := context.Background()
	now := time.Now()
	item := func(id string) json.RawMessage { return json.RawMessage(`{"type":"message","id":"` + id + `"}`) }
	object := json.RawMessage(`{"object":"response"}`)
	for _, r := range []struct {
		account, id string
		r           state.Response
		expires     time.Duration
	}{
		{"acct_a", "resp_1", state.Response{Response: object, Items: []json.RawMessage{item("in_1"), item("out_1a"), item("out_1b")}, Inputs: 1}, time.Hour},
		{"acct_a", "resp_2", state.Response{Response: object, Items: []json.RawMessage{item("in_2a"), item("in_2b"), item("out_2")}, Inputs: 2}, time.Hour},
		{"acct_a", "resp_legacy", state.Response{Items: []json.RawMessage{item("old_a"), item("old_b")}, Inputs: 1}, time.Hour},
		{"acct_a", "resp_soon", state.Response{Response: object, Items: []json.RawMessage{item("in_s"), item("out_s")}, Inputs: 1}, time.Minute},
		{"acct_b", "resp_b", state.Response{Response: object, Items: []json.RawMessage{item("in_b"), item("out_b")}, Inputs: 1}, time.Hour},
	} {
		if err := s.SaveResponse(ctx, r.account, r.id, r.r, now.Add(r.expires)); err != nil {
			t.Fatalf("SaveResponse(%s): %v", r.id, err)
		}
	}
	outputs := func(account string, at time.Time, ids ...string) map[string][]string {
		t.Helper()
		got, err := s.ResponseOutputs(ctx, account, ids, at)
		if err != nil {
			t.Fatalf("ResponseOutputs(%s, %v): %v", account, ids, err)
		}
		out := map[string][]string{}
		for id, items := range got {
			out[id] = rawStrings(items)
		}
		return out
	}
	strs := func(ids ...string) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = string(item(id))
		}
		return out
	}
	later := now.Add(30 * time.Minute) // resp_soon has expired
	want := map[string][]string{"resp_1": strs("out_1a", "out_1b"), "resp_2": strs("out_2"), "resp_legacy": strs("old_a", "old_b")}
	got := outputs("acct_a", later, "resp_1", "resp_2", "resp_legacy", "resp_soon", "resp_b", "resp_none", "resp_1")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ResponseOutputs of acct_a (-want +got):\n%s", diff)
	}
	if got := outputs("acct_b", now, "resp_1", "resp_2", "resp_legacy", "resp_soon"); len(got) != 0 {
		t.Errorf("ResponseOutputs of another account's responses = %v, want none", got)
	}
	if got := outputs("acct_a", now); len(got) != 0 {
		t.Errorf("ResponseOutputs of no ids = %v, want none", got)
	}
	// More ids than SQLite takes parameters (32766), the two known among
	// them.
	many := []string{"resp_b"}
	for i := range 40000 {
		many = append(many, fmt.Sprintf("resp_x%d", i))
	}
	many = append(many, "resp_2")
	if diff := cmp.Diff(map[string][]string{"resp_2": strs("out_2")}, outputs("acct_a", now, many...)); diff != "" {
		t.Errorf("ResponseOutputs of %d ids (-want +got):\n%s", len(many), diff)
	}
}

func testImages[S state.Images](t *testing.T, s S) {
	ctx := context.Background()
	now := time.Now()
	png := []byte("\x89PNG\r\n\x1a\n\x00\xffbytes")
	if err := s.SaveImage(ctx, "acct_a", "img_1", "image/png", png, now.Add(time.Hour)); err != nil {
		t.Fatalf("SaveImage: %v", err)
	}
	ct, data, err := s.Image(ctx, "img_1", now)
	if err != nil || ct != "image/png" || string(data) != string(png) {
		t.Fatalf("Image = %q %q %v", ct, data, err)
	}
	if err := s.SaveImage(ctx, "acct_b", "img_1", "image/png", []byte("other"), now.Add(time.Hour)); !errors.Is(err, authz.ErrExists) {
		t.Errorf("SaveImage(same id) error = %v, want ErrExists", err)
	}
	if err := s.SaveImage(ctx, "acct_a", "img_old", "image/png", png, now.Add(-time.Minute)); err != nil {
		t.Fatalf("SaveImage: %v", err)
	}
	for name, lookup := range map[string]func() error{
		"expired":    func() error { _, _, err := s.Image(ctx, "img_1", now.Add(time.Hour)); return err },
		"unknown id": func() error { _, _, err := s.Image(ctx, "img_2", now); return err },
		"pruned":     func() error { _, _, err := s.Image(ctx, "img_old", now.Add(-time.Hour)); return err },
	} {
		if err := lookup(); !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s: error = %v, want ErrNotFound", name, err)
		}
	}
}

// rawStrings compacts items, for comparing them as text.
func rawStrings(items []json.RawMessage) []string {
	var out []string
	for _, it := range items {
		var b bytes.Buffer
		if err := json.Compact(&b, it); err != nil {
			return append(out, "invalid JSON: "+string(it))
		}
		out = append(out, b.String())
	}
	return out
}
