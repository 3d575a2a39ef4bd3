package extproc_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
)

// captureLog is a CaptureSink that keeps captures in memory.
type captureLog struct {
	mu sync.Mutex
	cs []authz.Capture
}

func (l *captureLog) SaveCapture(_ context.Context, c authz.Capture) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cs = append(l.cs, c)
	return nil
}

func (l *captureLog) wait(t *testing.T, n int) []authz.Capture {
	t.Helper()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.cs) >= n })
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]authz.Capture(nil), l.cs...)
}

// Payload capture keeps the request as the client sent it and the answer
// as the client got it, redacted by its rules: members replaced whole,
// patterns and anything key-like hidden in every string, in JSON and in
// streams' events; a body cut at the cap is not kept when member rules
// could not be applied to it.
func TestCaptureRedacts(t *testing.T) {
	sink := &captureLog{}
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Capture = &extproc.Capture{Sink: sink, MaxBytes: 16384, Redact: extproc.Redaction{
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
	var json, sse, cut authz.Capture
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
