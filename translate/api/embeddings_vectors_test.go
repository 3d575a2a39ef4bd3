package api

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
)

// FuzzEmbeddingBase64 checks both directions against encoding/binary and
// encoding/base64: float JSON to the gateway's base64 is OpenAI's
// encoding of the same float32 values, and base64 back to float JSON reads
// as the same values.
func FuzzEmbeddingBase64(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f, 0xcd, 0xcc, 0xcc, 0xbd})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0xff, 0x7f, 0x7f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = raw[:len(raw)/4*4]
		finite := make([]byte, 0, len(raw))
		for i := 0; i < len(raw); i += 4 {
			f := math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
				finite = append(finite, raw[i:i+4]...)
			}
		}
		want := base64.StdEncoding.EncodeToString(finite)
		// base64 → float JSON, exactly as encoding/json writes float32.
		floats, _, err := appendEmbedding(nil, nil, json.RawMessage(`"`+want+`"`), false)
		if err != nil {
			t.Fatal(err)
		}
		values := make([]float32, len(finite)/4)
		for i := range values {
			values[i] = math.Float32frombits(binary.LittleEndian.Uint32(finite[4*i:]))
		}
		std, _ := json.Marshal(values)
		if len(values) > 0 && !bytes.Equal(floats, std) {
			t.Fatalf("floats %s, encoding/json %s", floats, std)
		}
		// float JSON → base64, bit for bit (also -0 and subnormals).
		b64, _, err := appendEmbedding(nil, nil, floats, true)
		if err != nil {
			t.Fatal(err)
		}
		if string(b64) != `"`+want+`"` {
			t.Fatalf("base64 %s, want %q", b64, want)
		}
	})
}
