package gemini

import (
	"testing"

	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// hostilePrefix is the start of a stream the hostile events follow.
const hostilePrefix = ""

func play(t *testing.T, chunks [][]byte) []byte {
	out, _ := runStream(t, streamReq, chunks)
	return out
}

// Events of the wrong shape end the stream cleanly, never with a panic.
func TestStreamHostileEvents(t *testing.T) {
	translatetest.CheckHostileEvents(t, hostilePrefix, []string{
		`null`,
		`[]`,
		`1`,
		`"x"`,
		`{"candidates":null}`,
		`{"candidates":[null]}`,
		`{"candidates":[1]}`,
		`{"candidates":"x"}`,
		`{"candidates":[{"content":null,"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":null}}]}`,
		`{"candidates":[{"content":{"parts":[null,1]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":null}]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":null}}]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":1}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":"x"}]}}]}`,
		`{"candidates":[{"index":"0"}]}`,
		`{"candidates":[{"finishReason":1}]}`,
		`{"usageMetadata":"x"}`,
		`{"usageMetadata":null,"candidates":[{"finishReason":"STOP"}]}`,
		`{"error":null}`,
		`{"error":1}`,
		`{"error":{"message":1}}`,
		`{"candidates":[{"content":{"parts":[{"thought":"yes"}]}}]}`,
	}, play)
}

// An event over the SSE decoder's limit ends the stream with one error
// event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	translatetest.CheckOversizedEvent(t, hostilePrefix, sse.DefaultMax, openai.StreamEventTooLarge, play)
}
