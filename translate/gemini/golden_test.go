package gemini

import (
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// The golden cases replay recorded Gemini API traffic (under
// testdata/fixtures/gemini, provenance in testdata/fixtures/MANIFEST.md) through the
// translators; each case folder holds the client request (request.json),
// the upstream request (upstream.json) and what the client gets
// (client.json or client.sse). No embeddings or Imagen success was
// recorded: those cases answer with the hand-written provider bodies in
// their folders (response.json), in the documented shape, as the
// testdata READMEs say. The request's model is the target's upstream
// model, so that each case names the model of its recording, but in the
// alias cases (translatetest.UpstreamModel).

const (
	eventStream = "text/event-stream"
	jsonUTF8    = "application/json; charset=UTF-8"
)

var chatGoldens = []translatetest.Case{
	{Name: "basic", Recording: recorded + "test_google_model.bodies/00.response.json", ContentType: jsonUTF8},
	{Name: "alias", Recording: recorded + "test_google_model.bodies/00.response.json", ContentType: jsonUTF8},
	{Name: "stream", Recording: recorded + "test_google_model_stream.bodies/00.response.sse", ContentType: eventStream},
	{Name: "stream-alias", Recording: recorded + "test_google_model_stream.bodies/00.response.sse", ContentType: eventStream},
	{Name: "stream-include-usage", Recording: recorded + "test_google_model_stream.bodies/00.response.sse", ContentType: eventStream},
	{Name: "stream-tool-call", Recording: recorded + "test_google_model_iter_stream.bodies/00.response.sse", ContentType: eventStream},
	{Name: "stream-tool-result", Recording: recorded + "test_google_model_iter_stream.bodies/01.response.sse", ContentType: eventStream},
	{Name: "stream-tool-results-text", Recording: recorded + "test_google_model_iter_stream.bodies/02.response.sse", ContentType: eventStream},
	{Name: "stream-thought-signature", Recording: recorded + "test_google_streaming_tool_call_thought_signature.bodies/00.response.sse", ContentType: eventStream},
	{Name: "stream-thought-signature-result", Recording: recorded + "test_google_streaming_tool_call_thought_signature.bodies/01.response.sse", ContentType: eventStream},
	// Google's error envelope is the same for every method; this 404 was
	// recorded from batchEmbedContents.
	{Name: "model-not-found", Recording: recorded + "TestGoogle.test_embed_error.bodies/00.response.json", Status: 404, ContentType: jsonUTF8},
	{Name: "stream-model-not-found", Recording: recorded + "TestGoogle.test_embed_error.bodies/00.response.json", Status: 404, ContentType: jsonUTF8},
	{Name: "credential-rejected", Recording: "testdata/chat/credential-rejected/response.json", Status: 403, ContentType: jsonUTF8},
	{Name: "cached-content", Recording: "../vertex/testdata/chat/cached-content/response.json", ContentType: jsonUTF8},
	{Name: "stream-cached-content", Recording: "testdata/chat/stream-cached-content/response.sse", ContentType: eventStream},
}

var embeddingsGoldens = []translatetest.Case{
	{Name: "batch", Recording: "testdata/embeddings/batch/response.json", ContentType: jsonUTF8},
	{Name: "single-dimensions", Recording: "testdata/embeddings/single-dimensions/response.json", ContentType: jsonUTF8},
	{Name: "model-not-found", Recording: recorded + "TestGoogle.test_embed_error.bodies/00.response.json", Status: 404, ContentType: jsonUTF8},
}

var imagesGoldens = []translatetest.Case{
	{Name: "two-images", Recording: "testdata/images/two-images/response.json", ContentType: jsonUTF8},
	{Name: "jpeg", Recording: "testdata/images/jpeg/response.json", ContentType: jsonUTF8},
	{Name: "one-filtered", Recording: "testdata/images/one-filtered/response.json", ContentType: jsonUTF8},
	{Name: "responsible-ai", Recording: "testdata/images/responsible-ai/response.json", Status: 400, ContentType: jsonUTF8},
}

var goldenNow = func() time.Time { return time.Unix(1700000000, 0) }

func TestGoldenChat(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, chatGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		c := NewChat(translate.Target{Backend: "b", Provider: "gemini", Model: translatetest.UpstreamModel(req.Model), APIKey: "g-key"}, req).(*chat)
		c.now = goldenNow
		return c
	})
}

func TestGoldenEmbeddings(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/embeddings", translatetest.Embeddings, embeddingsGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseEmbeddingsRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return NewEmbeddings(translate.Target{Backend: "b", Provider: "gemini", Model: req.Model, APIKey: "g-key"}, req)
	})
}

func TestGoldenImages(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/images", translatetest.Images, imagesGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseImagesRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		im := NewImages(translate.Target{Backend: "b", Provider: "gemini", Model: req.Model, APIKey: "g-key"}, req).(*images)
		im.now = goldenNow
		return im
	})
}
