// Package translatetest holds what the translators' tests share: reading
// recorded traffic, cutting a stream at random points, playing a body
// through a translator the way the ext_proc server does, and golden files
// (the one -update flag, Golden and UpstreamJSON).
package translatetest

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"modelgate/translate"
)

// ReadFile reads a file or fails the test.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// UpstreamModel is the provider's id of the model a golden case's client
// asks for. Cases are recorded with the client's model as that id, but for
// a model named "alias:" and the id, a name the gateway's configuration
// gives the provider's model: its answer must name the client's model,
// not the id the provider answers with.
func UpstreamModel(model string) string {
	if id, ok := strings.CutPrefix(model, "alias:"); ok {
		return id
	}
	return model
}

// RandomChunks cuts b into chunks of 1 to max bytes.
func RandomChunks(r *rand.Rand, b []byte, max int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := 1 + r.IntN(min(len(b), max))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// Stream feeds chunks to a translator whose ResponseHeaders was already
// called, then Envoy's empty end-of-stream chunk, and returns the client
// bytes. Errors fail the test.
func Stream(t testing.TB, tr translate.Translator, chunks [][]byte) []byte {
	t.Helper()
	var out []byte
	for _, c := range chunks {
		b, err := tr.ResponseBody(c, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	b, err := tr.ResponseBody(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, b...)
}
