package cohere

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// Golden cases: each folder under testdata/<endpoint>/ holds the client's
// request (request.json), the upstream request (upstream.json) and what
// the client gets (client.json or client.sse). Recordings are real Cohere
// traffic (testdata/fixtures/cohere, provenance in testdata/fixtures/MANIFEST.md);
// provider.json and provider.sse in a case folder are hand-written from
// Cohere's documented v2 shapes (see the README.md files).
const sseType = "text/event-stream"

var chatGoldens = []translatetest.Case{
	{Name: "basic", Recording: recorded + "test_request_simple_success_with_vcr.bodies/00.response.json", ContentType: "application/json"},
	{Name: "alias", Recording: recorded + "test_request_simple_success_with_vcr.bodies/00.response.json", ContentType: "application/json"},
	{Name: "system-message", Recording: recorded + "test_cohere_model_instructions.bodies/00.response.json", ContentType: "application/json"},
	{Name: "tools", Recording: "testdata/chat/tools/provider.json", ContentType: "application/json"},
	{Name: "stream", Recording: "testdata/chat/stream/provider.sse", ContentType: sseType},
	{Name: "stream-alias", Recording: "testdata/chat/stream/provider.sse", ContentType: sseType},
	{Name: "stream-include-usage", Recording: "testdata/chat/stream/provider.sse", ContentType: sseType},
	{Name: "stream-tool-calls", Recording: "testdata/chat/stream-tool-calls/provider.sse", ContentType: sseType},
	{Name: "provider-error", Recording: recorded + "TestCohere.test_embed_error.bodies/00.response.json", Status: 404, ContentType: "application/json"},
	{Name: "cached-tokens", Recording: "testdata/chat/cached-tokens/provider.json", ContentType: "application/json"},
	{Name: "stream-cached-tokens", Recording: "testdata/chat/stream-cached-tokens/provider.sse", ContentType: sseType},
}

var embeddingsGoldens = []translatetest.Case{
	{Name: "float", Recording: "testdata/embeddings/float/provider.json", ContentType: "application/json"},
	{Name: "dimensions", Recording: "testdata/embeddings/dimensions/provider.json", ContentType: "application/json"},
	{Name: "base64", Recording: "testdata/embeddings/float/provider.json", ContentType: "application/json"},
	{Name: "embed-error", Recording: recorded + "TestCohere.test_embed_error.bodies/00.response.json", Status: 404, ContentType: "application/json"},
}

// goldenTarget is a Cohere backend that serves the client's model under
// its own name, but in the alias cases (translatetest.UpstreamModel).
func goldenTarget(model string) translate.Target {
	return translate.Target{Backend: "b", Provider: "cohere", Model: translatetest.UpstreamModel(model), APIKey: "co-key"}
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

// The base64 case encodes the float case's vectors as float32.
func TestEmbeddingsBase64IsFloat(t *testing.T) {
	var got, want struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	decoded := translatetest.FloatEmbeddings(t, translatetest.ReadFile(t, "testdata/embeddings/base64/client.json"))
	if err := json.Unmarshal(decoded, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(translatetest.ReadFile(t, "testdata/embeddings/float/client.json"), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" || len(got.Data) != 2 {
		t.Errorf("base64 vectors differ from the float case's (-float +base64):\n%s", diff)
	}
}
