package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

// Responses tests authz.Responses.
func Responses[S authz.Responses](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore,
		test[S]{"Responses", testResponses[S]},
		test[S]{"ResponseObjects", testResponseObjects[S]},
	)
}

// Images tests authz.Images.
func Images[S authz.Images](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore, test[S]{"Images", testImages[S]})
}

func testResponses[S authz.Responses](t *testing.T, s S) {
	ctx := context.Background()
	now := time.Now()
	// Kept as sent, bar insignificant spaces: key order is the client's.
	items := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"hi"}`),
		json.RawMessage(`{"type": "message", "role":"assistant", "content" : [{"z":1,"a":2}]}`)}
	if err := s.SaveResponse(ctx, "acct_a", "resp_1", authz.StoredResponse{Items: items}, now.Add(time.Hour)); err != nil {
		t.Fatalf("SaveResponse: %v", err)
	}
	got, err := s.Conversation(ctx, "acct_a", "resp_1", now)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	if diff := cmp.Diff(rawStrings(items), rawStrings(got)); diff != "" {
		t.Errorf("Conversation (-saved +got):\n%s", diff)
	}
	if err := s.SaveResponse(ctx, "acct_b", "resp_1", authz.StoredResponse{Items: items}, now.Add(time.Hour)); !errors.Is(err, authz.ErrExists) {
		t.Errorf("SaveResponse(same id) error = %v, want ErrExists", err)
	}
	// Already expired when saved: the save itself prunes it.
	if err := s.SaveResponse(ctx, "acct_a", "resp_old", authz.StoredResponse{Items: items}, now.Add(-time.Minute)); err != nil {
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
func testResponseObjects[S authz.Responses](t *testing.T, s S) {
	ctx := context.Background()
	now := time.Now()
	want := authz.StoredResponse{
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
	legacy := authz.StoredResponse{Items: want.Items, Inputs: 1}
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

func testImages[S authz.Images](t *testing.T, s S) {
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
