package anthropic

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
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

// relay runs a Messages exchange with Anthropic through the relay, the
// upstream body in chunks, and returns what the client got.
func relay(t testing.TB, req *api.MessagesRequest, contentType string, chunks [][]byte) []byte {
	t.Helper()
	m := NewMessages(translate.Target{Provider: "anthropic", Model: "claude-sonnet-4-20250514"}, req)
	m.ResponseHeaders(200, contentType)
	var out []byte
	for i, c := range chunks {
		b, err := m.ResponseBody(c, i == len(chunks)-1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func messagesRequest(t testing.TB, model string, stream bool) *api.MessagesRequest {
	t.Helper()
	body := `{"model":` + string(must(json.Marshal(model))) + `,"max_tokens":100,"messages":[{"role":"user","content":"Hi"}]`
	if stream {
		body += `,"stream":true`
	}
	req, err := api.ParseMessagesRequest([]byte(body+"}"), false)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// The relay's answer names the model the client asked for, an alias of
// the id Anthropic answers with, and is otherwise as Anthropic sent it:
// the message, and the stream however it is cut. An answer that names
// the client's model already passes as it came.
func TestMessagesRelayModelIsTheClients(t *testing.T) {
	const provider, alias = `"model":"claude-sonnet-4-20250514"`, `"model":"claude-sonnet-4-0"`
	msg := []byte(`{"id":"msg_1","type":"message","role":"assistant", ` + provider + ` ,"content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":8,"output_tokens":2}}`)
	if got, want := relay(t, messagesRequest(t, "claude-sonnet-4-0", false), "application/json", [][]byte{msg}), bytes.Replace(msg, []byte(provider), []byte(alias), 1); !bytes.Equal(got, want) {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
	if got := relay(t, messagesRequest(t, "claude-sonnet-4-20250514", false), "application/json", [][]byte{msg}); !bytes.Equal(got, msg) {
		t.Errorf("a message of the client's model: %s", got)
	}
	up := translatetest.ReadFile(t, recorded+"test_anthropic_model_thinking_part_stream.bodies/00.response.sse")
	want := bytes.Replace(up, []byte(`{"model":"claude-sonnet-4-20250514",`), []byte(`{"model":"claude-sonnet-4-0",`), 1)
	if bytes.Equal(want, up) || bytes.Count(up, []byte("claude-sonnet-4-20250514")) != 1 {
		t.Fatal("the recording no longer names its model once, in message_start")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, chunks := range [][][]byte{{up}, translatetest.RandomChunks(r, up, 16), translatetest.RandomChunks(r, up, 700)} {
		if got := relay(t, messagesRequest(t, "claude-sonnet-4-0", true), "text/event-stream", chunks); !bytes.Equal(got, want) {
			t.Fatalf("stream in %d chunks:\n got %s\nwant %s", len(chunks), got, want)
		}
	}
	if got := relay(t, messagesRequest(t, "claude-sonnet-4-20250514", true), "text/event-stream", [][]byte{up}); !bytes.Equal(got, up) {
		t.Errorf("a stream of the client's model is not relayed as it came")
	}
}

// Whatever Anthropic streams, cut anywhere, the relay gives the client
// the same bytes.
func FuzzMessagesRelaySplit(f *testing.F) {
	f.Add(translatetest.ReadFile(f, recorded+"test_anthropic_model_thinking_part_stream.bodies/00.response.sse")[:1200], uint64(1))
	f.Add([]byte("event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"x\",\"model\":\"y\"}}\r\n\r\n"), uint64(2))
	f.Add([]byte(": hi\n\nevent: message_start\ndata: {\"type\":\"message_start\",\ndata: \"message\":{\"model\":\"x\"}}\n\n"), uint64(3))
	f.Fuzz(func(t *testing.T, up []byte, seed uint64) {
		req := messagesRequest(t, "claude-sonnet-4-0", true)
		whole := relay(t, req, "text/event-stream", [][]byte{up})
		got := relay(t, req, "text/event-stream", append(translatetest.RandomChunks(rand.New(rand.NewPCG(seed, seed)), up, 50), nil))
		if !bytes.Equal(whole, got) {
			t.Fatalf("split output differs\nwhole %q\nsplit %q", whole, got)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
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
