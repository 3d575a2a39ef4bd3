package extproc

import (
	"bytes"
	"strings"
	"testing"

	"modelgate/extproc/redact"
	"modelgate/translate"
)

// A captured chunk hides the text its translator reported also when the
// client's copy was scrubbed of a credential (a stream's error event
// beside a text delta): the spans are the translator's bytes', and the
// capture is scrubbed as the client's copy was.
func TestCaptureHidesTextOfAScrubbedChunk(t *testing.T) {
	st := newCapture(&Capture{MaxBytes: 1 << 10, Redact: redact.Rules{Members: []string{"content"}}}, "application/json", nil)
	tout := []byte("event: content_block_delta\ndata: {\"delta\":{\"type\":\"text_delta\",\"text\":\"my diary\"}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"key KEY-123456789 refused\"}}\n\n")
	start := bytes.Index(tout, []byte("my diary"))
	texts := []translate.Text{{Start: start, End: start + len("my diary"), Kind: translate.TextAnswer}}
	scrub := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("KEY-123456789"), []byte(redact.Redacted)) }
	st.translated(scrub(tout), tout, texts, scrub)
	got := string(st.resp.b)
	if strings.Contains(got, "my diary") || strings.Contains(got, "KEY-123456789") || strings.Count(got, redact.Redacted) != 2 {
		t.Errorf("captured %q", got)
	}
}
