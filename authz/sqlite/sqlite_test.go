package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) authz.Store {
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "test.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "test.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	if got, err := s.AccountByName(ctx, "acme"); err != nil || got.ID != a.ID {
		t.Errorf("AccountByName after reopen = %+v, %v; want %s", got, err, a.ID)
	}
}

func TestResponses(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	items := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"hi"}`)}
	if err := s.SaveResponse(ctx, "acct_a", "resp_1", items, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Conversation(ctx, "acct_a", "resp_1", now)
	if err != nil || len(got) != 1 || string(got[0]) != string(items[0]) {
		t.Fatalf("Conversation = %s, %v", got, err)
	}
	for name, lookup := range map[string]func() error{
		"another account": func() error { _, err := s.Conversation(ctx, "acct_b", "resp_1", now); return err },
		"unknown id":      func() error { _, err := s.Conversation(ctx, "acct_a", "resp_2", now); return err },
		"expired":         func() error { _, err := s.Conversation(ctx, "acct_a", "resp_1", now.Add(2*time.Hour)); return err },
	} {
		if err := lookup(); !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("%s: error = %v, want ErrNotFound", name, err)
		}
	}
}

func TestImages(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "i.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	png := []byte("\x89PNG\r\n\x1a\nbytes")
	if err := s.SaveImage(ctx, "acct_a", "img_1", "image/png", png, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ct, data, err := s.Image(ctx, "img_1", now)
	if err != nil || ct != "image/png" || string(data) != string(png) {
		t.Fatalf("Image = %q %q %v", ct, data, err)
	}
	if _, _, err := s.Image(ctx, "img_1", now.Add(2*time.Hour)); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("expired: error = %v, want ErrNotFound", err)
	}
	if _, _, err := s.Image(ctx, "img_2", now); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("unknown: error = %v, want ErrNotFound", err)
	}
	if err := s.SaveImage(ctx, "acct_b", "img_1", "image/png", []byte("other"), now.Add(time.Hour)); err == nil {
		t.Error("a second image with the same id replaced the first")
	}
}
