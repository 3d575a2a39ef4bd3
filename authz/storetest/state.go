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

func testResponses(t *testing.T, s authz.Store) {
	ctx := context.Background()
	now := time.Now()
	// Kept as sent, bar insignificant spaces: key order is the client's.
	items := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"hi"}`),
		json.RawMessage(`{"type": "message", "role":"assistant", "content" : [{"z":1,"a":2}]}`)}
	if err := s.SaveResponse(ctx, "acct_a", "resp_1", items, now.Add(time.Hour)); err != nil {
		t.Fatalf("SaveResponse: %v", err)
	}
	got, err := s.Conversation(ctx, "acct_a", "resp_1", now)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	if diff := cmp.Diff(rawStrings(items), rawStrings(got)); diff != "" {
		t.Errorf("Conversation (-saved +got):\n%s", diff)
	}
	if err := s.SaveResponse(ctx, "acct_b", "resp_1", items, now.Add(time.Hour)); !errors.Is(err, authz.ErrExists) {
		t.Errorf("SaveResponse(same id) error = %v, want ErrExists", err)
	}
	// Already expired when saved: the save itself prunes it.
	if err := s.SaveResponse(ctx, "acct_a", "resp_old", items, now.Add(-time.Minute)); err != nil {
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

func testImages(t *testing.T, s authz.Store) {
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
