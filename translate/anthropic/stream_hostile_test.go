package anthropic

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
	} {
		t.Run(ev, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			out, _ := runStream(t, streamReq, [][]byte{[]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":1}}}\n\n" + "data: " + ev + "\n\n")})
			checkEnd(t, out)
		})
	}
}

// An event over the SSE decoder's limit ends the stream with one error
// event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 1<<20)
	chunks := [][]byte{[]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":1}}}\n\n" + "data: {\"x\":\"")}
	for range sse.DefaultMax>>20 + 1 {
		chunks = append(chunks, big)
	}
	chunks = append(chunks, []byte("\"}\n\n"))
	out, _ := runStream(t, streamReq, chunks)
	checkEnd(t, out)
	if !bytes.Contains(out, []byte(openai.StreamEventTooLarge)) {
		t.Errorf("want the too-large error, got %.300s", out)
	}
}
