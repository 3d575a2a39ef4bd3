package translatetest

import (
	"bytes"
	"strings"
	"testing"

	"modelgate/translate/openai/spec"
)

// CheckStreamEnd checks a client chat stream: valid chunks, then [DONE]
// or one error event last.
func CheckStreamEnd(t testing.TB, out []byte) {
	t.Helper()
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
	events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
	last := events[len(events)-1]
	errs := strings.Count(string(out), `data: {"error":`)
	if last != "data: [DONE]" && (errs != 1 || !strings.HasPrefix(last, `data: {"error":`)) {
		t.Errorf("want [DONE] or one error event last, got:\n%s", out)
	}
}

// OversizedEvent is a stream that starts with prefix and then sends one
// data event over limit bytes (the SSE decoder's), in 1 MiB chunks.
func OversizedEvent(prefix string, limit int) [][]byte {
	big := bytes.Repeat([]byte("a"), 1<<20)
	chunks := [][]byte{[]byte(prefix + "data: {\"x\":\"")}
	for range limit>>20 + 1 {
		chunks = append(chunks, big)
	}
	return append(chunks, []byte("\"}\n\n"))
}
