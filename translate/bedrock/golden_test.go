package bedrock

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

const eventStream = "application/vnd.amazon.eventstream"

// goldenCases replay recorded Bedrock Converse and ConverseStream traffic
// (under testdata/fixtures, provenance in testdata/fixtures/MANIFEST.md) through the
// translator; each case folder holds the client request (request.json),
// the upstream request (upstream.json) and what the client gets
// (client.json or client.sse).
//
// Each request.json is the OpenAI request that gives the recorded one, but
// for three differences: the translator leaves out an empty "system" (the
// error recordings send []), sends no toolResult "status" (the second
// tool turn sends "success"), and gives reasoning_effort's thinking budget
// a maxTokens above it (the thinking recording sends none).
var goldenCases = []translatetest.Case{
	{Name: "basic", Recording: recorded + "test_bedrock_model.bodies/00.response.json", ContentType: "application/json"},
	{Name: "alias", Recording: recorded + "test_bedrock_model.bodies/00.response.json", ContentType: "application/json"},
	{Name: "stream", Recording: recorded + "test_bedrock_model_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-alias", Recording: recorded + "test_bedrock_model_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-include-usage", Recording: recorded + "test_bedrock_model_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-tool-calls", Recording: recorded + "test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-tool-results", Recording: recorded + "test_bedrock_model_iter_stream.bodies/01.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-thinking", Recording: recorded + "test_bedrock_model_thinking_part_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "provider-error", Recording: recorded + "test_bedrock_error.bodies/00.response.json", Status: 400, ContentType: "application/json"},
	{Name: "stream-provider-error", Recording: recorded + "test_bedrock_streaming_error.bodies/00.response.json", Status: 400, ContentType: "application/json"},
	// Not recorded: built from Converse's documented usage
	// (testdata/chat/README.md); the stream's frames are its events.json
	// encoded (TestDocumentedStreamFrames).
	{Name: "cache-usage", Recording: "testdata/chat/cache-usage/provider.json", ContentType: "application/json"},
	{Name: "stream-cache-usage", Recording: "testdata/chat/stream-cache-usage/provider.eventstream.bin", ContentType: eventStream},
}

// documentedStreams are the cases whose ConverseStream answer is written
// by hand as events.json, each event a [type, payload] pair, and encoded
// into provider.eventstream.bin as Bedrock frames them.
var documentedStreams = []string{"stream-cache-usage"}

// TestDocumentedStreamFrames checks each documented stream's frames are
// its events encoded; -update writes them.
func TestDocumentedStreamFrames(t *testing.T) {
	for _, name := range documentedStreams {
		dir := filepath.Join("testdata", "chat", name)
		var events [][2]json.RawMessage
		if err := json.Unmarshal(translatetest.ReadFile(t, filepath.Join(dir, "events.json")), &events); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var frames []byte
		for _, e := range events {
			var typ string
			if err := json.Unmarshal(e[0], &typ); err != nil {
				t.Fatalf("%s: event type %s: %v", name, e[0], err)
			}
			frames = append(frames, frame(e[1], ":event-type", typ, ":content-type", "application/json", ":message-type", "event")...)
		}
		translatetest.Golden(t, filepath.Join(dir, "provider.eventstream.bin"), frames)
	}
}

func TestGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, goldenCases, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		// The recordings were made with the client's model as the upstream
		// one, but in the alias cases.
		c := NewChat(translate.Target{Backend: "b", Provider: "bedrock", Model: translatetest.UpstreamModel(req.Model), APIKey: "br-key"}, req).(*chat)
		c.now = func() time.Time { return time.Unix(1700000000, 0) }
		return c
	})
}
