package vertex

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// The golden cases replay recorded Vertex AI traffic (under
// testdata/fixtures/gemini/vertex, provenance in testdata/fixtures/MANIFEST.md) through
// the translators; each case folder holds the client request
// (request.json), the upstream request (upstream.json) and what the client
// gets (client.json or client.sse). No embeddings or Imagen traffic was
// recorded on Vertex AI: those cases answer with the hand-written provider
// bodies in their folders (response.json), in the documented shape, as the
// testdata READMEs say. The request's model is the target's upstream
// model, so that each case names the model of its recording.

const (
	recorded    = "../../testdata/fixtures/gemini/vertex/"
	eventStream = "text/event-stream"
	jsonUTF8    = "application/json; charset=UTF-8"
	// notFound is a 404 recorded from the Gemini API, in the error
	// envelope Vertex AI shares.
	notFound = "../../testdata/fixtures/gemini/TestGoogle.test_embed_error.bodies/00.response.json"
)

var chatGoldens = []translatetest.Case{
	{Name: "basic", Recording: recorded + "test_google_model_vertex_provider.bodies/00.response.json", ContentType: jsonUTF8},
	{Name: "stream", Recording: recorded + "test_google_vertex_service_tier_flex_stream.bodies/00.response.sse", ContentType: eventStream},
	{Name: "stream-include-usage", Recording: recorded + "test_google_vertex_service_tier_flex_stream.bodies/00.response.sse", ContentType: eventStream},
	{Name: "model-not-found", Recording: notFound, Status: 404, ContentType: jsonUTF8},
	{Name: "credential-rejected", Recording: "testdata/chat/credential-rejected/response.json", Status: 403, ContentType: jsonUTF8},
	// Vertex AI's rawPredict answers in the Messages API's shape; this
	// answer was recorded from the Anthropic API.
	{Name: "claude", Recording: "../../testdata/fixtures/anthropic/test_anthropic_model_instructions.bodies/00.response.json", ContentType: "application/json"},
	// Built from Anthropic's documented usage (testdata/chat/README.md).
	{Name: "claude-cache-usage", Recording: "../anthropic/testdata/chat/cache-usage/provider.json", ContentType: "application/json"},
	{Name: "cached-content", Recording: "testdata/chat/cached-content/response.json", ContentType: jsonUTF8},
}

var embeddingsGoldens = []translatetest.Case{
	{Name: "batch", Recording: "testdata/embeddings/batch/response.json", ContentType: jsonUTF8},
	{Name: "gemini-embedding", Recording: "testdata/embeddings/gemini-embedding/response.json", ContentType: jsonUTF8},
	{Name: "model-not-found", Recording: notFound, Status: 404, ContentType: jsonUTF8},
}

var imagesGoldens = []translatetest.Case{
	{Name: "two-images", Recording: "testdata/images/two-images/response.json", ContentType: jsonUTF8},
	{Name: "credential-rejected", Recording: "testdata/images/credential-rejected/response.json", Status: 403, ContentType: jsonUTF8},
}

func TestGoldenChat(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, chatGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return pinCreated(t, NewChat(translate.Target{Backend: "b", Provider: "vertex", Model: req.Model, Project: "pydantic-ai", APIKey: "ya29.token"}, req))
	})
}

func TestGoldenEmbeddings(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/embeddings", translatetest.Embeddings, embeddingsGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseEmbeddingsRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return NewEmbeddings(translate.Target{Backend: "b", Provider: "vertex", Model: req.Model, Project: "pydantic-ai", Region: "us-central1", APIKey: "ya29.token"}, req)
	})
}

func TestGoldenImages(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/images", translatetest.Images, imagesGoldens, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseImagesRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return pinCreated(t, NewImages(translate.Target{Backend: "b", Provider: "vertex", Model: req.Model, Project: "pydantic-ai", Region: "us-central1", APIKey: "ya29.token"}, req))
	})
}

// createdTime wraps a translator whose clock the test cannot set
// (the Gemini and Anthropic translators' own): each "created" it writes
// must be the current time and becomes 1700000000 for the golden files.
type createdTime struct {
	translate.Translator
	t     testing.TB
	start int64
}

// Output implements translate.Reporter: the created time it rewrites
// keeps its length, so the spans hold.

func pinCreated(t testing.TB, tr translate.Translator) translate.Translator {
	return &createdTime{Translator: tr, t: t, start: time.Now().Unix()}
}

var created = regexp.MustCompile(`"created":(\d+)`)

func (c *createdTime) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := c.Translator.ResponseBody(chunk, endOfStream)
	return created.ReplaceAllFunc(out, func(m []byte) []byte {
		n, _ := strconv.ParseInt(string(created.FindSubmatch(m)[1]), 10, 64)
		if n < c.start || n > time.Now().Unix() {
			c.t.Errorf("created %d is not the time of the exchange", n)
		}
		return []byte(`"created":1700000000`)
	}), err
}
