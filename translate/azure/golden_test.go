package azure

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

// Golden cases: each folder under testdata/<endpoint>/ holds the client's
// request (request.json), the upstream request (upstream.json) and what
// the client gets (client.json or client.sse). Recordings under
// testdata/fixtures are real Azure (chat) or OpenAI (embeddings, the same
// wire format) traffic; provider.json and provider.sse in a case folder are
// hand-written from Azure's documented shape (see the README.md files).
const (
	fixtures = "../../testdata/fixtures/"
	jsonType = "application/json"
	sseType  = "text/event-stream; charset=utf-8"
)

var chatGoldens = []translatetest.Case{
	{Name: "basic", Recording: fixtures + "azure/azure-chat-basic.bodies/00.response.json", ContentType: jsonType},
	{Name: "content-filter-results", Recording: fixtures + "azure/test_azure_provider_call.bodies/00.response.json", ContentType: jsonType},
	{Name: "stream", Recording: "testdata/chat/stream/provider.sse", ContentType: sseType},
	{Name: "stream-include-usage", Recording: "testdata/chat/stream/provider.sse", ContentType: sseType},
	{Name: "stream-content-filter", Recording: "testdata/chat/stream-content-filter/provider.sse", ContentType: sseType},
	{Name: "stream-async-filter", Recording: "testdata/chat/stream-async-filter/provider.sse", ContentType: sseType},
	{Name: "content-filter-error", Recording: "testdata/chat/content-filter-error/provider.json", Status: 400, ContentType: jsonType},
	{Name: "deployment-not-found", Recording: "testdata/chat/deployment-not-found/provider.json", Status: 404, ContentType: jsonType},
}

var embeddingsGoldens = []translatetest.Case{
	{Name: "float", Recording: "testdata/embeddings/float/provider.json", ContentType: jsonType},
	{Name: "deployment-not-found", Recording: "testdata/embeddings/deployment-not-found/provider.json", Status: 404, ContentType: jsonType},
}

// base64Goldens are the embeddings cases RunGoldens cannot take: the
// OpenAPI document types an embedding as an array of numbers only.
var base64Goldens = []translatetest.Case{
	{Name: "base64", Recording: fixtures + "openai/embeddings/embeddings-base64.bodies/00.response.json", ContentType: jsonType},
	{Name: "dimensions", Recording: fixtures + "openai/embeddings/embeddings-dimensions.bodies/00.response.json", ContentType: jsonType},
	{Name: "array-input", Recording: fixtures + "openai/embeddings/TestOpenAI.test_query.bodies/00.response.json", ContentType: jsonType},
}

var imagesGoldens = []translatetest.Case{
	{Name: "dall-e-3", Recording: "testdata/images/dall-e-3/provider.json", ContentType: jsonType},
	{Name: "content-policy-violation", Recording: "testdata/images/content-policy-violation/provider.json", Status: 400, ContentType: jsonType},
}

// goldenTarget is an Azure backend whose deployment is named after the
// client's model, as deployments usually are.
func goldenTarget(model string) translate.Target {
	return translate.Target{Backend: "b", Provider: "azure", Model: model, APIKey: "azure-key", APIVersion: "2024-12-01-preview"}
}

func TestChatGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, chatGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return NewChat(goldenTarget(req.Model), req)
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

// TestEmbeddingsBase64Golden checks the base64 cases as RunGoldens does the
// others, but validates the answer with its vectors decoded. Azure encodes
// base64 itself, so the recorded vectors reach the client as sent.
func TestEmbeddingsBase64Golden(t *testing.T) {
	for _, tc := range base64Goldens {
		t.Run(tc.Name, func(t *testing.T) {
			dir := filepath.Join("testdata", "embeddings", tc.Name)
			tr := newGoldenEmbeddings(t, translatetest.ReadFile(t, filepath.Join(dir, "request.json")))
			up, err := tr.RequestBody()
			translatetest.Golden(t, filepath.Join(dir, "upstream.json"), translatetest.UpstreamJSON(t, up, err))
			if err != nil {
				t.Fatal(err)
			}
			tr.ResponseHeaders(200, tc.ContentType)
			recording := translatetest.ReadFile(t, tc.Recording)
			out, err := tr.ResponseBody(recording, true)
			if err != nil {
				t.Fatal(err)
			}
			translatetest.Golden(t, filepath.Join(dir, "client.json"), out)
			spec.ValidateT(t, "CreateEmbeddingResponse", decodeBase64Embeddings(t, out))
			if got, want := base64Vectors(t, out), base64Vectors(t, recording); !slices.Equal(got, want) || len(got) == 0 {
				t.Errorf("the client's vectors are not the provider's")
			}
		})
	}
}

// base64Vectors lists the embeddings of a base64 CreateEmbeddingResponse.
func base64Vectors(t testing.TB, body []byte) []string {
	t.Helper()
	var r struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range r.Data {
		out = append(out, d.Embedding)
	}
	return out
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

func TestImagesGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/images", translatetest.Images, imagesGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseImagesRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return NewImages(goldenTarget(req.Model), req)
	})
}

// The golden streams open as Azure's do, with a prompt_filter_results
// chunk whose object is "" and choices empty; RunGoldens validates what
// the client gets of it as a chat.completion.chunk.
func TestGoldenStreamsOpenWithPromptFilterChunk(t *testing.T) {
	for _, tc := range chatGoldens {
		if tc.ContentType != sseType {
			continue
		}
		first, _, _ := bytes.Cut(translatetest.ReadFile(t, tc.Recording), []byte("\n\n"))
		if !bytes.Contains(first, []byte(`"object":""`)) || !bytes.Contains(first, []byte(`"choices":[]`)) ||
			!bytes.Contains(first, []byte(`"prompt_filter_results"`)) {
			t.Errorf("%s: the provider stream opens with %s", tc.Name, first)
		}
		first, _, _ = bytes.Cut(translatetest.ReadFile(t, filepath.Join("testdata", "chat", tc.Name, "client.sse")), []byte("\n\n"))
		spec.ValidateT(t, "CreateChatCompletionStreamResponse", bytes.TrimPrefix(first, []byte("data: ")))
	}
}
