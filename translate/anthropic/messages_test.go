package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// A provider's error reaches a Messages client as Anthropic gave it, but
// a refusal of the gateway's credentials and a body that is no Anthropic
// error become the gateway's api_error.
func TestMessagesError(t *testing.T) {
	const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	if got := string(messagesError([]byte(overloaded))); got != overloaded {
		t.Errorf("Anthropic's error: %s", got)
	}
	for _, body := range []string{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, `<html>bad gateway</html>`} {
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		got := messagesError([]byte(body))
		if json.Unmarshal(got, &e) != nil || e.Type != "error" || e.Error.Type != "api_error" || e.Error.Message == "" {
			t.Errorf("%s became %s", body, got)
		}
	}
}

// A recorded stream relayed to a Messages client that asked for the
// alias (claude-sonnet-4-0) of the id Anthropic answers with
// (claude-sonnet-4-20250514): the whole stream, an event per chunk, and
// one content_block_delta once the stream is under way.
func BenchmarkMessagesStream(b *testing.B) {
	req, err := api.ParseMessagesRequest(translatetest.ReadFile(b, recorded+"test_anthropic_model_thinking_part_stream.bodies/00.request.json"), false)
	if err != nil {
		b.Fatal(err)
	}
	up := translatetest.ReadFile(b, recorded+"test_anthropic_model_thinking_part_stream.bodies/00.response.sse")
	var chunks [][]byte
	for ev := range bytes.SplitAfterSeq(up, []byte("\n\n")) {
		chunks = append(chunks, ev)
	}
	target := translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-20250514"}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(up)))
		for b.Loop() {
			m := NewMessages(target, req)
			m.ResponseHeaders(200, "text/event-stream")
			for i, c := range chunks {
				if _, err := m.ResponseBody(c, i == len(chunks)-1); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("delta", func(b *testing.B) {
		m := NewMessages(target, req)
		m.ResponseHeaders(200, "text/event-stream")
		m.ResponseBody(chunks[0], false) //nolint:errcheck // message_start
		delta := chunks[3]
		if !bytes.Contains(delta, []byte("content_block_delta")) {
			b.Fatalf("chunk 3 is %q", delta)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(delta)))
		for b.Loop() {
			if out, _ := m.ResponseBody(delta, false); len(out) == 0 {
				b.Fatal("no output")
			}
		}
	})
}
