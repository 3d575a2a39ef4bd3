package sse

import (
	"bytes"
	"testing"
)

// Whole passes a stream on in whole events whatever its chunk edges, and
// all of it at the end: cut anywhere, the pieces join to the stream.
func TestWholeEvents(t *testing.T) {
	stream := []byte("event: a\ndata: {\"text\":\"hel\"}\n\nevent: b\r\ndata: {\"text\":\"lo\"}\r\n\r\ndata: x\r\rdata: tail")
	for size := 1; size <= len(stream); size++ {
		var w Whole
		var got []byte
		for i := 0; i < len(stream); i += size {
			end := min(i+size, len(stream))
			piece := w.Cut(bytes.Clone(stream[i:end]), end == len(stream))
			if end < len(stream) && len(piece) > 0 && !bytes.HasSuffix(piece, []byte("\n\n")) && !bytes.HasSuffix(piece, []byte("\r\n\r\n")) && !bytes.HasSuffix(piece, []byte("\r\r")) {
				t.Fatalf("size %d: piece %q does not end an event", size, piece)
			}
			got = append(got, piece...)
		}
		if !bytes.Equal(got, stream) {
			t.Fatalf("size %d: joined %q, want %q", size, got, stream)
		}
	}
}
