package extproc_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/extproc/redact"
)

// frontDoors are a streamed request of each client API, with what finds
// the text deltas the client got in one event of its stream.
var frontDoors = []struct {
	name, path, body string
	deltas           func(event map[string]any) []string
}{
	{"chat", "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Hello!"}]}`,
		func(ev map[string]any) (out []string) {
			for _, c := range anySlice(ev["choices"]) {
				if d, ok := anyMap(c)["delta"].(map[string]any); ok {
					out = append(out, str(d["content"]))
				}
			}
			return out
		}},
	{"responses", "/v1/responses", `{"model":"gpt-4o","stream":true,"input":"Hello!"}`,
		func(ev map[string]any) []string {
			if ev["type"] == "response.output_text.delta" {
				return []string{str(ev["delta"])}
			}
			return nil
		}},
	{"messages", "/v1/messages", `{"model":"gpt-4o","stream":true,"max_tokens":1024,"messages":[{"role":"user","content":"Hello!"}]}`,
		func(ev map[string]any) []string {
			if d, ok := ev["delta"].(map[string]any); ok && d["type"] == "text_delta" {
				return []string{str(d["text"])}
			}
			return nil
		}},
}

func anySlice(v any) []any        { s, _ := v.([]any); return s }
func anyMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func str(v any) string            { s, _ := v.(string); return s }

// streamDeltas are the text deltas of an event stream's JSON events.
func streamDeltas(t *testing.T, body []byte, deltas func(map[string]any) []string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		for _, d := range deltas(ev) {
			if d != "" {
				out = append(out, d)
			}
		}
	}
	return out
}

// With the member rule content, a capture keeps no text the client was
// streamed, on any front door: the translators report where the text is,
// whatever the client API calls its members (a Messages stream's
// text_delta "text" was kept verbatim before).
func TestCaptureHidesStreamedTextOnEveryFrontDoor(t *testing.T) {
	sink := &captureLog{}
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) {
		c.Capture = &extproc.Capture{Sink: sink, MaxBytes: 1 << 20, Redact: redact.Rules{Members: []string{"content"}}}
	})
	for i, fd := range frontDoors {
		res := f.gw.Post(t, fd.path, f.keys["valid"], fd.body)
		if res.Status != 200 {
			t.Fatalf("%s: %d %s", fd.name, res.Status, res.Body)
		}
		text := streamDeltas(t, res.Body, fd.deltas)
		if len(strings.Join(text, "")) < 20 {
			t.Fatalf("%s: the client got too little text to check (%q)", fd.name, text)
		}
		c := sink.wait(t, i+1)[i]
		if c.ResponseTruncated || !strings.Contains(c.Response, `"[redacted]"`) {
			t.Errorf("%s: capture (truncated %v) hides nothing: %.300s", fd.name, c.ResponseTruncated, c.Response)
		}
		for _, d := range text {
			if len(strings.TrimSpace(d)) >= 4 && strings.Contains(c.Response, d) {
				i := strings.Index(c.Response, d)
				t.Errorf("%s: the capture keeps the streamed text %q: %s", fd.name, d, c.Response[max(0, i-300):i+50])
			}
		}
	}
}

// A span names the answer's finish reasons on every front door, in the
// client API's words: chat's finish_reason, the Messages API's
// stop_reason, a Responses answer's status; streamed or not.
func TestSpanFinishReasonsOnEveryFrontDoor(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	f := newFixture(t, extproctest.Config{}, func(c *extproc.Config) { c.Tracer = tp.Tracer("modelgate") })
	want := map[string]string{"chat": "stop", "responses": "completed", "messages": "end_turn"}
	for _, fd := range frontDoors {
		for _, stream := range []bool{true, false} {
			body := fd.body
			if !stream {
				body = strings.Replace(body, `"stream":true`, `"stream":false`, 1)
			}
			n := len(rec.Ended())
			if res := f.gw.Post(t, fd.path, f.keys["valid"], body); res.Status != 200 {
				t.Fatalf("%s: %d %s", fd.name, res.Status, res.Body)
			}
			waitFor(t, func() bool { return len(rec.Ended()) > n })
			var reasons []string
			for _, kv := range rec.Ended()[n].Attributes() {
				if kv.Key == "gen_ai.response.finish_reasons" {
					reasons = kv.Value.AsStringSlice()
				}
			}
			if !slices.Equal(reasons, []string{want[fd.name]}) {
				t.Errorf("%s (stream %v): finish reasons %q, want %q", fd.name, stream, reasons, want[fd.name])
			}
		}
	}
}
