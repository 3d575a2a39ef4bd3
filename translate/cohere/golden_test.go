package cohere

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

// Golden cases: each folder under testdata/<endpoint>/ holds the client's
// request (request.json), the upstream request (upstream.json) and what
// the client gets (client.json or client.sse). Recordings are real Cohere
// traffic (testdata/fixtures/cohere, provenance in its MANIFEST.md);
// provider.json and provider.sse in a case folder are hand-written from
// Cohere's documented v2 shapes (see the README.md files).
const sseType = "text/event-stream"

var chatGoldens = []translatetest.Case{
	{Name: "basic", Recording: recorded + "test_request_simple_success_with_vcr.bodies/00.response.json", ContentType: "application/json"},
	{Name: "system-message", Recording: recorded + "test_cohere_model_instructions.bodies/00.response.json", ContentType: "application/json"},
	{Name: "tools", Recording: "testdata/chat/tools/provider.json", ContentType: "application/json"},
	{Name: "stream", Recording: "testdata/chat/stream/provider.sse", ContentType: sseType},
	{Name: "stream-include-usage", Recording: "testdata/chat/stream/provider.sse", ContentType: sseType},
	{Name: "stream-tool-calls", Recording: "testdata/chat/stream-tool-calls/provider.sse", ContentType: sseType},
	{Name: "provider-error", Recording: recorded + "TestCohere.test_embed_error.bodies/00.response.json", Status: 404, ContentType: "application/json"},
}

var embeddingsGoldens = []translatetest.Case{
	{Name: "float", Recording: "testdata/embeddings/float/provider.json", ContentType: "application/json"},
	{Name: "dimensions", Recording: "testdata/embeddings/dimensions/provider.json", ContentType: "application/json"},
	{Name: "embed-error", Recording: recorded + "TestCohere.test_embed_error.bodies/00.response.json", Status: 404, ContentType: "application/json"},
}

// goldenTarget is a Cohere backend that serves the client's model under
// its own name.
func goldenTarget(model string) translate.Target {
	return translate.Target{Backend: "b", Provider: "cohere", Model: model, APIKey: "co-key"}
}

func TestChatGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, chatGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		c := NewChat(goldenTarget(req.Model), req).(*chat)
		c.now = func() time.Time { return time.Unix(1700000000, 0) }
		return c
	})
}

func TestEmbeddingsGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/embeddings", translatetest.Embeddings, embeddingsGoldens, newGoldenEmbeddings)
}

func newGoldenEmbeddings(t testing.TB, request []byte) translate.Translator {
	req, err := api.ParseEmbeddingsRequest(request)
	if err != nil {
		t.Fatal(err)
	}
	return NewEmbeddings(goldenTarget(req.Model), req)
}

// TestEmbeddingsBase64Golden is the golden case RunGoldens cannot take:
// the OpenAPI document types an embedding as an array of numbers only, so
// the base64 answer is validated with its vectors decoded, and they must
// be the float case's vectors as float32.
func TestEmbeddingsBase64Golden(t *testing.T) {
	dir := filepath.Join("testdata", "embeddings", "base64")
	tr := newGoldenEmbeddings(t, translatetest.ReadFile(t, filepath.Join(dir, "request.json")))
	up, err := tr.RequestBody()
	translatetest.Golden(t, filepath.Join(dir, "upstream.json"), translatetest.UpstreamJSON(t, up, err))
	if err != nil {
		t.Fatal(err)
	}
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody(translatetest.ReadFile(t, "testdata/embeddings/float/provider.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	translatetest.Golden(t, filepath.Join(dir, "client.json"), out)
	decoded := decodeBase64Embeddings(t, out)
	spec.ValidateT(t, "CreateEmbeddingResponse", decoded)
	var got, want struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	json.Unmarshal(decoded, &got)                                                             //nolint:errcheck // validated above
	json.Unmarshal(translatetest.ReadFile(t, "testdata/embeddings/float/client.json"), &want) //nolint:errcheck // compared below
	if diff := cmp.Diff(want, got); diff != "" || len(got.Data) != 2 {
		t.Errorf("base64 vectors differ from the float case's (-float +base64):\n%s", diff)
	}
}

// decodeBase64Embeddings replaces each base64 embedding of a
// CreateEmbeddingResponse with the array of its little-endian float32s.
func decodeBase64Embeddings(t testing.TB, body []byte) []byte {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	data, _ := r["data"].([]any)
	for _, d := range data {
		item, _ := d.(map[string]any)
		s, ok := item["embedding"].(string)
		if !ok {
			t.Fatalf("embedding is not base64: %v", item["embedding"])
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw)%4 != 0 {
			t.Fatalf("embedding %q: %v", s, err)
		}
		v := make([]float64, len(raw)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		item["embedding"] = v
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
