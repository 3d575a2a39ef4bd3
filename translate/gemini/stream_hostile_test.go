package gemini

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
	} {
		t.Run(ev, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			out, _ := runStream(t, streamReq, [][]byte{[]byte("" + "data: " + ev + "\n\n")})
			translatetest.CheckStreamEnd(t, out)
		})
	}
}

// An event over the SSE decoder's limit ends the stream with one error
// event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	chunks := translatetest.OversizedEvent("", sse.DefaultMax)
	out, _ := runStream(t, streamReq, chunks)
	translatetest.CheckStreamEnd(t, out)
	if !bytes.Contains(out, []byte(openai.StreamEventTooLarge)) {
		t.Errorf("want the too-large error, got %.300s", out)
	}
}
