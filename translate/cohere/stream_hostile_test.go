package cohere

import (
	"bytes"
	"testing"

	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

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
			translatetest.CheckStreamEnd(t, out)
		})
	}
}

// An event over the SSE decoder's limit ends the stream with one error
// event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	chunks := translatetest.OversizedEvent("event: message-start\ndata: {\"id\":\"c1\",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n", sse.DefaultMax)
	out, _ := runStream(t, chunks)
	translatetest.CheckStreamEnd(t, out)
	if !bytes.Contains(out, []byte(openai.StreamEventTooLarge)) {
		t.Errorf("want the too-large error, got %.300s", out)
	}
}
