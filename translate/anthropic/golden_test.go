package anthropic

import (
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// goldenCases replay recorded Anthropic traffic (under testdata/fixtures,
// provenance in testdata/fixtures/MANIFEST.md) through the translator; each case folder
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
	// Not recorded: built from Anthropic's documented usage (testdata/chat/README.md).
	{Name: "cache-usage", Recording: "testdata/chat/cache-usage/provider.json", ContentType: "application/json"},
	{Name: "stream-cache-usage", Recording: "testdata/chat/stream-cache-usage/provider.sse", ContentType: "text/event-stream; charset=utf-8"},
	// Not recorded: built from Anthropic's documented web search answers (testdata/chat/README.md).
	{Name: "web-search", Recording: "testdata/chat/web-search/provider.json", ContentType: "application/json"},
	{Name: "stream-web-search", Recording: "testdata/chat/stream-web-search/provider.sse", ContentType: "text/event-stream; charset=utf-8"},
}

func TestGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, goldenCases, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		// The recordings were made with the client's model as the upstream
		// one. The model may search (only the web search cases ask to).
		c := NewChat(translate.Target{Backend: "b", Provider: "anthropic", Model: req.Model, APIKey: "sk-ant", WebSearch: true}, req).(*chat)
		c.now = func() time.Time { return time.Unix(1700000000, 0) }
		return c
	})
}
