package translatetest

import (
	"bytes"
	"strings"
	"testing"

	"modelgate/translate/api/spec"
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

// CheckHostileEvents plays each data event after prefix through play (the
// upstream chunks in, the client stream out) and checks that the stream
// ends cleanly: a panic fails the test as any would.
func CheckHostileEvents(t *testing.T, prefix string, events []string, play func(t *testing.T, chunks [][]byte) []byte) {
	t.Helper()
	for _, ev := range events {
		t.Run(ev, func(t *testing.T) {
			CheckStreamEnd(t, play(t, [][]byte{[]byte(prefix + "data: " + ev + "\n\n")}))
		})
	}
}

// CheckOversizedEvent plays an event over limit after prefix and checks
// that the stream ends with one error event saying want.
func CheckOversizedEvent(t *testing.T, prefix string, limit int, want string, play func(t *testing.T, chunks [][]byte) []byte) {
	t.Helper()
	out := play(t, OversizedEvent(prefix, limit))
	CheckStreamEnd(t, out)
	if !bytes.Contains(out, []byte(want)) {
		t.Errorf("want the error %q, got %.300s", want, out)
	}
}
