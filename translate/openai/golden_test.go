package openai

import (
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

const (
	jsonType = "application/json"
	sseType  = "text/event-stream; charset=utf-8"
	mistral  = "../../testdata/fixtures/mistral/"
)

// goldenCases replay recorded upstream traffic (under testdata/fixtures,
// provenance in testdata/fixtures/MANIFEST.md) through OpenAI's translator; each case
// folder holds the client request (request.json), the upstream request
// (upstream.json) and what the client gets (client.json or client.sse).
var goldenCases = []translatetest.Case{
	{Name: "basic", Recording: recorded + "chat/chat-basic.bodies/00.response.json", ContentType: jsonType},
	{Name: "tools", Recording: recorded + "chat/chat-tools.bodies/00.response.json", ContentType: jsonType},
	{Name: "parallel-tools", Recording: recorded + "chat/chat-parallel-tools.bodies/00.response.json", ContentType: jsonType},
	{Name: "tool-choice-required", Recording: recorded + "chat/test_openai_tool_output.bodies/00.response.json", ContentType: jsonType},
	{Name: "tool-result", Recording: recorded + "chat/test_openai_tool_output.bodies/01.response.json", ContentType: jsonType},
	{Name: "json-mode", Recording: recorded + "chat/chat-json-mode.bodies/00.response.json", ContentType: jsonType},
	{Name: "reasoning", Recording: recorded + "chat/chat-reasoning.bodies/00.response.json", ContentType: jsonType},
	{Name: "multimodal", Recording: recorded + "chat/chat-multimodal.bodies/00.response.json", ContentType: jsonType},
	{Name: "stream", Recording: recorded + "chat/chat-streaming-detailed-usage.bodies/00.response.sse", ContentType: sseType},
	{Name: "stream-include-usage", Recording: recorded + "chat/chat-streaming-detailed-usage.bodies/00.response.sse", ContentType: sseType},
	{Name: "streaming", Recording: recorded + "chat/chat-streaming.bodies/00.response.sse", ContentType: sseType},
	{Name: "stream-tool-calls", Recording: recorded + "chat/test_run_stream_sync_streams_real_model.bodies/00.response.sse", ContentType: sseType},
	{Name: "stream-tool-result", Recording: recorded + "chat/test_run_stream_sync_streams_real_model.bodies/01.response.sse", ContentType: sseType},
	{Name: "provider-error", Recording: recorded + "errors/chat-bad-request.bodies/00.response.json", Status: 400, ContentType: jsonType},
	{Name: "ollama", Recording: "../../testdata/fixtures/openai-compatible/test_ollama_local_native_output_uses_json_schema.bodies/00.response.json", ContentType: jsonType},
	// Not recorded: built from OpenAI's documented usage (testdata/chat/README.md).
	{Name: "cached-tokens", Recording: "testdata/chat/cached-tokens/provider.json", ContentType: jsonType},
}

// compatibleGoldenCases go through the translator with each provider's
// quirks (testdata/chat/<provider>/); their answers are built from the
// providers' documented formats (testdata/chat/README.md).
var compatibleGoldenCases = map[string][]translatetest.Case{
	"deepseek":   {{Name: "cache-hit", Recording: "testdata/chat/deepseek/cache-hit/provider.json", ContentType: jsonType}},
	"groq":       {{Name: "cached-tokens", Recording: "testdata/chat/groq/cached-tokens/provider.json", ContentType: jsonType}},
	"openrouter": {{Name: "file-annotations", Recording: "testdata/chat/openrouter/file-annotations/provider.json", ContentType: jsonType}},
}

// mistralGoldenCases go through the translator with Mistral's quirks. The
// tool call answers are not recorded: they are written by hand in the
// shape Mistral answers with (see testdata/chat/README.md).
var mistralGoldenCases = []translatetest.Case{
	{Name: "penalties", Recording: mistral + "test_mistral_forwards_penalties.bodies/00.response.json", ContentType: jsonType},
	{Name: "thinking-stream", Recording: mistral + "test_mistral_model_thinking_part_iter.bodies/00.response.sse", ContentType: sseType},
	{Name: "thinking-stream-include-usage", Recording: mistral + "test_mistral_model_thinking_part_iter.bodies/00.response.sse", ContentType: sseType},
	{Name: "tools", Recording: "testdata/chat/mistral/tools/answer.json", ContentType: jsonType},
	{Name: "stream-tools", Recording: "testdata/chat/mistral/stream-tools/answer.sse", ContentType: sseType},
}

// goldenChat returns RunGoldens' translator constructor for provider,
// made by newChat.
func goldenChat(provider string, newChat func(translate.Target, *api.ChatRequest) translate.Translator) func(testing.TB, []byte) translate.Translator {
	return func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return newChat(translate.Target{Backend: "b", Provider: provider, Model: "upstream-model", APIKey: "sk-provider"}, req)
	}
}

func TestGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, goldenCases, goldenChat("openai", NewChat))
}

func TestGoldenCompatible(t *testing.T) {
	for provider, cases := range compatibleGoldenCases {
		t.Run(provider, func(t *testing.T) {
			translatetest.RunGoldens(t, "testdata/chat/"+provider, translatetest.Chat, cases,
				goldenChat(provider, NewCompatibleChat(CompatibleProviders()[provider])))
		})
	}
}

func TestGoldenMistral(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat/mistral", translatetest.Chat, mistralGoldenCases,
		goldenChat("mistral", NewCompatibleChat(CompatibleProviders()["mistral"])))
}
