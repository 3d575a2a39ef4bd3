package anthropic

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

// goldenCases replay recorded Anthropic traffic (under testdata/fixtures,
// provenance in its MANIFEST.md) through the translator; each case folder
// holds the client request (request.json), the upstream request
// (upstream.json) and what the client gets (client.json or client.sse).
//
// Each request.json is the OpenAI request that gives the recorded one,
// except for what an OpenAI request cannot say: the recordings send
// "stream": false, tool_result content as a plain string with
// "is_error": false, and (provider-error) output_config.effort "xhigh",
// which no OpenAI member maps to, so that case sends the same request
// without it. reasoning_effort "minimal" is the recorded thinking budget
// of 1024 tokens. The count_tokens recording (404) is not used: it is not
// a chat exchange.
var goldenCases = []translatetest.Case{
	{Name: "basic", Recording: recorded + "test_anthropic_model_instructions.bodies/00.response.json", ContentType: "application/json"},
	{Name: "tools", Recording: recorded + "test_multiple_parallel_tool_calls.bodies/00.response.json", ContentType: "application/json"},
	{Name: "tool-results", Recording: recorded + "test_multiple_parallel_tool_calls.bodies/01.response.json", ContentType: "application/json"},
	{Name: "stream-thinking", Recording: recorded + "test_anthropic_model_thinking_part_stream.bodies/00.response.sse", ContentType: "text/event-stream; charset=utf-8"},
	{Name: "stream-redacted-thinking-include-usage", Recording: recorded + "test_anthropic_model_thinking_part_redacted_stream.bodies/00.response.sse", ContentType: "text/event-stream; charset=utf-8"},
	{Name: "provider-error", Recording: recorded + "test_anthropic_explicit_effort_xhigh_unsupported_model_errors.bodies/00.response.json", Status: 400, ContentType: "application/json"},
}

func TestGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, goldenCases, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		// The recordings were made with the client's model as the upstream one.
		c := NewChat(translate.Target{Backend: "b", Provider: "anthropic", Model: req.Model, APIKey: "sk-ant"}, req).(*chat)
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
