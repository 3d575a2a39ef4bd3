package bedrock

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

const eventStream = "application/vnd.amazon.eventstream"

// goldenCases replay recorded Bedrock Converse and ConverseStream traffic
// (under testdata/fixtures, provenance in its MANIFEST.md) through the
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
	{Name: "stream", Recording: recorded + "test_bedrock_model_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-include-usage", Recording: recorded + "test_bedrock_model_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-tool-calls", Recording: recorded + "test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-tool-results", Recording: recorded + "test_bedrock_model_iter_stream.bodies/01.response.eventstream.bin", ContentType: eventStream},
	{Name: "stream-thinking", Recording: recorded + "test_bedrock_model_thinking_part_stream.bodies/00.response.eventstream.bin", ContentType: eventStream},
	{Name: "provider-error", Recording: recorded + "test_bedrock_error.bodies/00.response.json", Status: 400, ContentType: "application/json"},
	{Name: "stream-provider-error", Recording: recorded + "test_bedrock_streaming_error.bodies/00.response.json", Status: 400, ContentType: "application/json"},
}

func TestGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, goldenCases, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		// The recordings were made with the client's model as the upstream one.
		c := NewChat(translate.Target{Backend: "b", Provider: "bedrock", Model: req.Model, APIKey: "br-key"}, req).(*chat)
		c.now = func() time.Time { return time.Unix(1700000000, 0) }
		return c
	})
}

// TestGoldenChunksSaySomething requires every chunk of the golden streams
// to carry a delta, a finish reason or the usage: a provider event that
// has nothing for OpenAI clients (an empty thinking delta, a reasoning
// signature) is dropped rather than sent as an empty chunk.
func TestGoldenChunksSaySomething(t *testing.T) {
	for _, tc := range goldenCases {
		stream, err := os.ReadFile(filepath.Join("testdata/chat", tc.Name, "client.sse"))
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.SplitSeq(stream, []byte("\n")) {
			data, ok := bytes.CutPrefix(line, []byte("data: {"))
			if !ok {
				continue
			}
			var chunk struct {
				Choices []struct {
					Delta        map[string]json.RawMessage `json:"delta"`
					FinishReason *string                    `json:"finish_reason"`
				} `json:"choices"`
				Usage json.RawMessage `json:"usage"`
			}
			if err := json.Unmarshal(append([]byte("{"), data...), &chunk); err != nil {
				t.Fatalf("%s: %v", tc.Name, err)
			}
			if chunk.Usage != nil {
				continue
			}
			for _, c := range chunk.Choices {
				if len(c.Delta) == 0 && c.FinishReason == nil {
					t.Errorf("%s: a chunk that says nothing: %s", tc.Name, line)
				}
			}
		}
	}
}
