package bedrock

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const vectors = "../../testdata/spec/aws-eventstream/testdata/"

type decodedVector struct {
	Headers []struct {
		Name  string          `json:"name"`
		Type  byte            `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"headers"`
	Payload []byte `json:"payload"`
}

// normalize renders a header value the way the decoded vectors write it.
func normalize(h Header) any {
	switch v := h.Value.(type) {
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case string:
		return base64.StdEncoding.EncodeToString([]byte(v))
	case bool:
		return v
	case int8:
		return float64(v)
	case int16:
		return float64(v)
	case int32:
		return float64(v)
	case int64:
		return float64(v)
	}
	return nil
}

func TestAWSPositiveVectors(t *testing.T) {
	files, _ := filepath.Glob(vectors + "encoded/positive/*")
	if len(files) != 5 {
		t.Fatalf("found %d positive vectors", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			enc, _ := os.ReadFile(f)
			var want decodedVector
			raw, _ := os.ReadFile(vectors + "decoded/positive/" + filepath.Base(f))
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			var d Decoder
			msgs, err := d.Feed(enc)
			if err != nil || len(msgs) != 1 || d.Pending() {
				t.Fatalf("Feed = %d messages, %v", len(msgs), err)
			}
			if diff := cmp.Diff(want.Payload, msgs[0].Payload, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); diff != "" {
				t.Errorf("payload (-want +got):\n%s", diff)
			}
			if len(msgs[0].Headers) != len(want.Headers) {
				t.Fatalf("%d headers, want %d", len(msgs[0].Headers), len(want.Headers))
			}
			for i, h := range msgs[0].Headers {
				var wv any
				json.Unmarshal(want.Headers[i].Value, &wv)
				if h.Name != want.Headers[i].Name || h.Type != want.Headers[i].Type || !cmp.Equal(wv, normalize(h)) {
					t.Errorf("header %d = %s/%d/%v, want %s/%d/%v", i, h.Name, h.Type, normalize(h), want.Headers[i].Name, want.Headers[i].Type, wv)
				}
			}
		})
	}
}

func TestAWSNegativeVectors(t *testing.T) {
	files, _ := filepath.Glob(vectors + "encoded/negative/*")
	if len(files) != 4 {
		t.Fatalf("found %d negative vectors", len(files))
	}
	for _, f := range files {
		enc, _ := os.ReadFile(f)
		var d Decoder
		if _, err := d.Feed(enc); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error = %v, want ErrCorrupt", filepath.Base(f), err)
		}
	}
}

func decodeSplit(t testing.TB, data []byte, r *rand.Rand) ([]Message, error) {
	var d Decoder
	var out []Message
	for len(data) > 0 {
		n := len(data)
		if r != nil {
			n = 1 + r.IntN(min(len(data), 64))
		}
		msgs, err := d.Feed(data[:n])
		for _, m := range msgs {
			m.Payload = append([]byte(nil), m.Payload...)
			out = append(out, m)
		}
		if err != nil {
			return out, err
		}
		data = data[n:]
	}
	return out, nil
}

func TestRecordedStreamAnySplit(t *testing.T) {
	data, err := os.ReadFile("../../testdata/fixtures/bedrock/test_bedrock_model_stream.bodies/00.response.eventstream.bin")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := decodeSplit(t, data, nil)
	if err != nil || len(whole) < 5 || whole[0].Header(":event-type") != "messageStart" {
		t.Fatalf("whole decode: %d messages, %v", len(whole), err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		got, err := decodeSplit(t, data, r)
		if err != nil || !cmp.Equal(whole, got) {
			t.Fatalf("split decode differs: %v", err)
		}
	}
}

func FuzzDecoder(f *testing.F) {
	for _, dir := range []string{"positive", "negative"} {
		files, _ := filepath.Glob(vectors + "encoded/" + dir + "/*")
		for _, file := range files {
			b, _ := os.ReadFile(file)
			f.Add(b, uint64(len(b)))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		whole, werr := decodeSplit(t, data, nil)
		got, gerr := decodeSplit(t, data, rand.New(rand.NewPCG(seed, seed)))
		if (werr == nil) != (gerr == nil) || !cmp.Equal(whole, got) {
			t.Fatalf("split decode differs: %v vs %v", werr, gerr)
		}
	})
}
