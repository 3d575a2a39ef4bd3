package cohere

import (
	"bytes"
	"strings"
	"testing"

	"modelgate/translate/openai"
	"modelgate/translate/openai/spec"
	"modelgate/translate/sse"
)

// checkEnd checks a client stream: valid chunks, then [DONE] or one
// error event last.
func checkEnd(t *testing.T, out []byte) {
	t.Helper()
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
	events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
	last := events[len(events)-1]
	errs := strings.Count(string(out), `data: {"error":`)
	if last != "data: [DONE]" && (errs != 1 || !strings.HasPrefix(last, `data: {"error":`)) {
		t.Errorf("want [DONE] or one error event last, got:\n%s", out)
	}
}

// Events of the wrong shape end the stream cleanly, never with a panic.
func TestStreamHostileEvents(t *testing.T) {
	for _, ev := range []string{
		`null`,
		`[]`,
		`1`,
		`"x"`,
		`{"type":1}`,
		`{"type":"content-delta","delta":null}`,
		`{"type":"content-delta","delta":"x"}`,
		`{"type":"content-delta","delta":{"message":null}}`,
		`{"type":"content-delta","delta":{"message":{"content":1}}}`,
		`{"type":"content-delta","delta":{"message":{"content":{"text":1}}}}`,
		`{"type":"tool-call-start","delta":{"message":{"tool_calls":null}}}`,
		`{"type":"tool-call-start","delta":{"message":{"tool_calls":[1]}}}`,
		`{"type":"tool-call-delta","delta":{"message":{"tool_calls":{"function":"x"}}}}`,
		`{"type":"message-end","delta":{"usage":"x"}}`,
		`{"type":"message-end","delta":{"usage":null,"finish_reason":null}}`,
		`{"type":"message-end","delta":{"error":1}}`,
		`{"type":"message-end","delta":{"usage":{"tokens":null}}}`,
		`{"type":"message-start","id":1}`,
	} {
		t.Run(ev, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			out, _ := runStream(t, [][]byte{[]byte("event: message-start\ndata: {\"id\":\"c1\",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n" + "data: " + ev + "\n\n")})
			checkEnd(t, out)
		})
	}
}

// An event over the SSE decoder's limit ends the stream with one error
// event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 1<<20)
	chunks := [][]byte{[]byte("event: message-start\ndata: {\"id\":\"c1\",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n" + "data: {\"x\":\"")}
	for range sse.DefaultMax>>20 + 1 {
		chunks = append(chunks, big)
	}
	chunks = append(chunks, []byte("\"}\n\n"))
	out, _ := runStream(t, chunks)
	checkEnd(t, out)
	if !bytes.Contains(out, []byte(openai.StreamEventTooLarge)) {
		t.Errorf("want the too-large error, got %.300s", out)
	}
}
