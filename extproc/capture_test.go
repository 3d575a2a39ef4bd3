package extproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/sqlite"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/extproc/redact"
	"modelgate/extproc/redact/redacttest"
)

// captureLog is a CaptureSink that keeps captures in memory.
type captureLog struct {
	mu sync.Mutex
	cs []ledger.Capture
}

func (l *captureLog) SaveCapture(_ context.Context, c ledger.Capture) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cs = append(l.cs, c)
	return nil
}

func (l *captureLog) wait(t *testing.T, n int) []ledger.Capture {
	t.Helper()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.cs) >= n })
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ledger.Capture(nil), l.cs...)
}

// Payload capture keeps the request as the client sent it and the answer
// as the client got it, redacted by its rules: members replaced whole,
// patterns and anything key-like hidden in every string, in JSON and in
// streams' events; a body cut at the cap is not kept when member rules
// could not be applied to it.
func TestCaptureRedacts(t *testing.T) {
	sink := &captureLog{}
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Capture = &extproc.Capture{Sink: sink, MaxBytes: 16384, Redact: redact.Rules{
			Members:  []string{"content"},
			Patterns: []*regexp.Regexp{regexp.MustCompile(`\d{3}-\d{2}-\d{4}`)},
		}}
	})
	body := `{"model":"gpt-4o","user":"ssn 123-45-6789, key sk-proj-abcdefghijklmnopqrstuvwx","messages":[{"role":"user","content":"my secret diary"}]}`
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], body); res.Status != 200 {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	stream := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`
	if res := f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], stream); res.Status != 200 {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 20000) + `"}]}`
	f.gw.Post(t, "/v1/chat/completions", f.keys["valid"], big)
	cs := sink.wait(t, 3) // saved after each answer: in any order
	var json, sse, cut ledger.Capture
	for _, c := range cs {
		switch {
		case c.RequestTruncated:
			cut = c
		case strings.HasPrefix(c.Response, "data:"):
			sse = c
		default:
			json = c
		}
	}
	for _, leak := range []string{"my secret diary", "123-45-6789", "sk-proj-abcdefghijklmnopqrstuvwx", "Hi there", f.keys["valid"]} {
		for i, c := range cs {
			if strings.Contains(c.Request, leak) || strings.Contains(c.Response, leak) {
				t.Errorf("capture %d keeps %q", i, leak)
			}
		}
	}
	if !strings.Contains(json.Request, `"content":"[redacted]"`) || !strings.Contains(json.Request, `"user":"ssn [redacted], key [redacted]"`) ||
		!strings.Contains(json.Response, `"content":"[redacted]"`) || !strings.Contains(json.Response, `"total_tokens":385`) {
		t.Errorf("JSON capture:\nrequest %s\nresponse %s", json.Request, json.Response)
	}
	if json.RequestID == "" || json.AccountID != f.account.ID || json.KeyID == "" || json.Status != 200 || json.Model != "gpt-4o" {
		t.Errorf("JSON capture's ids: %+v", json)
	}
	if !strings.HasPrefix(sse.Response, "data: {") || !strings.Contains(sse.Response, `"content":"[redacted]"`) || !strings.Contains(sse.Response, "data: [DONE]") {
		t.Errorf("stream capture (truncated %v, %d bytes): ...%s", sse.ResponseTruncated, len(sse.Response), sse.Response[max(0, len(sse.Response)-300):])
	}
	if !cut.RequestTruncated || strings.Contains(cut.Request, "xxxx") || !strings.Contains(cut.Request, "could not be redacted by member") {
		t.Errorf("cut capture: truncated %v, %.200s", cut.RequestTruncated, cut.Request)
	}
}

// waitFor waits until cond holds, for at most 10s: the capture is saved
// after the answer went out.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held")
		}
	}
}

// teeSink keeps captures in memory, in a store and in a JSON-lines file,
// as `to: store` and `to: file` do.
type teeSink struct {
	captureLog
	store authz.Store
	mu    sync.Mutex
	file  *os.File
}

func (s *teeSink) SaveCapture(ctx context.Context, c ledger.Capture) error {
	if err := s.store.SaveCaptures(ctx, []ledger.Capture{c}); err != nil {
		return err
	}
	line, err := json.Marshal(map[string]any{"request_id": c.RequestID, "request": c.Request, "response": c.Response})
	if err != nil {
		return err
	}
	s.mu.Lock()
	_, err = s.file.Write(append(line, '\n'))
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.captureLog.SaveCapture(ctx, c)
}

// echoProvider answers a chat completion with the last message's content,
// or with the credential it was sent when that content is "ECHO-KEY": as
// JSON, or as a stream that sends it whole in one event and again in two
// events split inside the credential, each event a chunk of its own.
func echoProvider(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			t.Errorf("provider: %v", err)
			http.Error(w, "bad request", 400)
			return
		}
		text := req.Messages[len(req.Messages)-1].Content
		if text == "ECHO-KEY" {
			text = "you sent me " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + "."
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "echo: " + text}}},
				"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(s string) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}, "finish_reason": nil}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		event(text + " ")
		k := len(text)/2 + 1
		event(text[:k])
		event(text[k:])
		io.WriteString(w, "data: [DONE]\n\n")
	})
}

// With default redaction, no credential of any listed shape, and not the
// provider's own key when the provider echoes it, reaches the capture file
// or the store: sent in a request, echoed in a JSON answer, and streamed
// back whole and split across two events (two chunks).
func TestCaptureKeepsNoCredential(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, _ := store.CreateAccount(ctx, "acme")
	key, _, _ := authz.CreateKey(ctx, store, acct.ID, "", nil)
	file, err := os.Create(filepath.Join(t.TempDir(), "captures.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sink := &teeSink{store: store, file: file}
	rnd := rand.New(rand.NewPCG(26, 4))
	providerKey := "prov-" + strconv.FormatUint(rnd.Uint64(), 36) + strconv.FormatUint(rnd.Uint64(), 36) // of no listed shape
	srv, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
			Models: []routing.Model{{ID: "m", Deployments: []routing.Deployment{{Backend: "main", Model: "m"}}}}},
		Credentials: map[string]extproc.Credentials{"main": {APIKey: providerKey}},
		Capture:     &extproc.Capture{Sink: sink},
	}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		t.Fatal(err)
	}
	gw := extproctest.Start(t, srv, extproctest.Config{Backends: map[string]http.Handler{"main": echoProvider(t)}})

	samples := redacttest.Credentials(rnd)
	if len(samples) < 20 {
		t.Fatalf("%d credential formats", len(samples))
	}
	samples = append(samples, redacttest.Credential{Name: "the provider's key, echoed", Text: "ECHO-KEY", Secret: providerKey})
	n := 0
	for _, s := range samples {
		content, _ := json.Marshal("here it is: " + s.Text + " -- keep it safe")
		if s.Text == "ECHO-KEY" {
			content, _ = json.Marshal(s.Text)
		}
		for _, stream := range []string{"false", "true"} {
			body := `{"model":"m","stream":` + stream + `,"messages":[{"role":"user","content":` + string(content) + `}]}`
			res := gw.Post(t, "/v1/chat/completions", key, body)
			if res.Status != 200 || (s.Text != "ECHO-KEY" && !strings.Contains(string(res.Body), strings.Split(s.Secret, "\n")[0][:8])) {
				t.Fatalf("%s (stream %s): %d %.300s", s.Name, stream, res.Status, res.Body)
			}
			n++
		}
	}
	cs := sink.wait(t, n)
	kept, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	stored := ""
	for _, c := range cs {
		sc, err := store.CaptureOf(ctx, c.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		stored += sc.Request + "\n" + sc.Response + "\n"
	}
	if !strings.Contains(stored, "here it is: [redacted] -- keep it safe") || !strings.Contains(stored, "you sent me [redacted].") {
		t.Errorf("the captures lost more than the credentials: %.2000s", stored)
	}
	for _, s := range samples {
		secret := s.Secret
		half := len(secret) / 2 // the halves of the split stream too
		for _, leak := range []string{secret, secret[:half], secret[half:]} {
			if len(leak) < 8 {
				continue
			}
			q, _ := json.Marshal(leak) // as it stands in a JSON string
			if strings.Contains(stored, leak) || strings.Contains(stored, string(q[1:len(q)-1])) {
				t.Errorf("%s: the store keeps %q", s.Name, leak)
			}
			qq, _ := json.Marshal(string(q[1 : len(q)-1])) // in a JSON string in the file's JSON
			if strings.Contains(string(kept), leak) || strings.Contains(string(kept), string(qq[1:len(qq)-1])) {
				t.Errorf("%s: the capture file keeps %q", s.Name, leak)
			}
		}
	}
}
