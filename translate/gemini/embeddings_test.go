package gemini

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

func newEmbeddings(t testing.TB, model, body string) *embeddings {
	t.Helper()
	req, err := api.ParseEmbeddingsRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return NewEmbeddings(translate.Target{Provider: "gemini", Model: model, APIKey: "g-key"}, req).(*embeddings)
}

func TestCheckDimensions(t *testing.T) {
	tests := []struct {
		model string
		dims  int
		ok    bool
	}{
		{"gemini-embedding-001", 0, true},
		{"gemini-embedding-001", 128, true},
		{"models/gemini-embedding-001", 3072, true},
		{"gemini-embedding-001", 127, false},
		{"gemini-embedding-001", 3073, false},
		{"text-embedding-004", 768, true},
		{"text-embedding-005", 769, false},
		{"text-multilingual-embedding-002", 1024, false},
		{"embedding-001", 768, false},
		{"some-future-model", 5000, true},
	}
	for _, tt := range tests {
		err := CheckDimensions(tt.model, tt.dims)
		var re *api.RequestError
		if tt.ok != (err == nil) || err != nil && (!errors.As(err, &re) || re.Param != "dimensions" || re.Code != "invalid_value") {
			t.Errorf("CheckDimensions(%s, %d) = %v", tt.model, tt.dims, err)
		}
	}
}

// A batch answered with fewer vectors than inputs cannot be mapped to the
// inputs: it is a gateway error, not a short list.
func TestEmbeddingsCountMismatch(t *testing.T) {
	e := newEmbeddings(t, "gemini-embedding-001", `{"model":"m","input":["a","b"]}`)
	if _, err := e.RequestBody(); err != nil {
		t.Fatal(err)
	}
	e.ResponseHeaders(200, "application/json")
	for _, body := range []string{`{"embeddings":[{"values":[1]}]}`, `{"embeddings":[{"values":[1]},{"values":"x"}]}`, `[]`, `<html>`} {
		if out, err := e.ResponseBody([]byte(body), true); err == nil {
			t.Errorf("%s: no error, got %s", body, out)
		}
	}
}

func TestEmbeddingsFloatAndBase64Agree(t *testing.T) {
	upstream := `{"embeddings":[{"values":[0.013671875,-0.0017547607,1e-8,-3.4028235e+38]},{"values":[0.5,-0,1,2]}]}`
	var got [2][]float32
	for i, format := range []string{"float", "base64"} {
		e := newEmbeddings(t, "gemini-embedding-001", `{"model":"m","input":["a","b"],"encoding_format":"`+format+`"}`)
		if _, err := e.RequestBody(); err != nil {
			t.Fatal(err)
		}
		e.ResponseHeaders(200, "application/json")
		out, err := e.ResponseBody([]byte(upstream), true)
		if err != nil {
			t.Fatal(err)
		}
		if format == "float" {
			spec.ValidateT(t, "CreateEmbeddingResponse", out)
		}
		got[i] = firstVector(t, out)
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) || len(got[0]) != 4 {
		t.Errorf("float %v, base64 %v", got[0], got[1])
	}
}

func firstVector(t *testing.T, body []byte) []float32 {
	t.Helper()
	var r struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Data) == 0 {
		t.Fatalf("%v: %s", err, body)
	}
	var v []float32
	if json.Unmarshal(r.Data[0].Embedding, &v) == nil {
		return v
	}
	var s string
	json.Unmarshal(r.Data[0].Embedding, &s)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%4 != 0 {
		t.Fatalf("%q is not base64 of float32 values", s)
	}
	for i := 0; i < len(raw); i += 4 {
		v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
	}
	return v
}

// BenchmarkEmbeddingsBatch translates a batchEmbedContents answer of 8
// vectors of 768 values to base64.
func BenchmarkEmbeddingsBatch(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"embeddings":[`)
	for i := range 8 {
		if i > 0 {
			sb.WriteString(",")
		}
		v := make([]float32, 768)
		for j := range v {
			v[j] = float32(math.Sin(float64(i*768+j))) / 30
		}
		vb, _ := json.Marshal(v)
		fmt.Fprintf(&sb, `{"values":%s}`, vb)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	input := `{"model":"m","input":["a","b","c","d","e","f","g","h"],"encoding_format":"base64"}`
	e := newEmbeddings(b, "gemini-embedding-001", input)
	if _, err := e.RequestBody(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		e.ResponseHeaders(200, "application/json")
		if _, err := e.ResponseBody(body, true); err != nil {
			b.Fatal(err)
		}
	}
}
