package anthropic

import (
	"testing"

	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// hostilePrefix is the start of a stream the hostile events follow.
const hostilePrefix = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":1}}}\n\n"

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
		`{"type":1}`,
		`{"type":"message_start","message":null}`,
		`{"type":"message_start","message":"x"}`,
		`{"type":"content_block_start","index":0,"content_block":null}`,
		`{"type":"content_block_start","index":"0","content_block":{"type":"tool_use"}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":1}}`,
		`{"type":"content_block_delta","index":0,"delta":null}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":"x"}`,
		`{"type":"message_delta","usage":"x"}`,
		`{"type":"message_delta","usage":null,"delta":{"stop_reason":null}}`,
		`{"type":"message_delta","delta":{"stop_reason":1}}`,
		`{"type":"error","error":null}`,
		`{"type":"error","error":"x"}`,
		`{"type":"error"}`,
		`{"type":"message_stop","x":[[[[[]]]]]}`,
	}, play)
}

// An event over the SSE decoder's limit ends the stream with one error
// event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	translatetest.CheckOversizedEvent(t, hostilePrefix, sse.DefaultMax, openai.StreamEventTooLarge, play)
}
