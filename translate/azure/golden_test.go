package azure

import (
	"bytes"
	"path/filepath"
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
	{Name: "cached-tokens", Recording: "testdata/chat/cached-tokens/provider.json", ContentType: jsonType},
}

var embeddingsGoldens = []translatetest.Case{
	{Name: "float", Recording: "testdata/embeddings/float/provider.json", ContentType: jsonType},
	{Name: "deployment-not-found", Recording: "testdata/embeddings/deployment-not-found/provider.json", Status: 404, ContentType: jsonType},
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
