package cohere

import (
	"testing"

	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// hostilePrefix is the start of a stream the hostile events follow.
const hostilePrefix = "event: message-start\ndata: {\"id\":\"c1\",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n"

func play(t *testing.T, chunks [][]byte) []byte {
	out, _ := runStream(t, chunks)
	return out
}

// Events of the wrong shape end the stream cleanly, never with a panic.
func TestStreamHostileEvents(t *testing.T) {
	translatetest.CheckHostileEvents(t, hostilePrefix, []string{
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
	}, play)
}

// An event over the SSE decoder's limit ends the stream with one error
// event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	translatetest.CheckOversizedEvent(t, hostilePrefix, sse.DefaultMax, openai.StreamEventTooLarge, play)
}
