package openai

import (
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// goldenCases replay recorded upstream traffic (under testdata/fixtures,
// provenance in its MANIFEST.md) through the translator; each case folder
// holds the client request (request.json), the upstream request
// (upstream.json) and what the client gets (client.json or client.sse).
var goldenCases = []translatetest.Case{
	{Name: "basic", Recording: recorded + "chat/chat-basic.bodies/00.response.json", ContentType: "application/json"},
	{Name: "tools", Recording: recorded + "chat/chat-tools.bodies/00.response.json", ContentType: "application/json"},
	{Name: "stream", Recording: recorded + "chat/chat-streaming-detailed-usage.bodies/00.response.sse", ContentType: "text/event-stream; charset=utf-8"},
	{Name: "stream-include-usage", Recording: recorded + "chat/chat-streaming-detailed-usage.bodies/00.response.sse", ContentType: "text/event-stream; charset=utf-8"},
	{Name: "stream-tool-calls", Recording: recorded + "chat/test_run_stream_sync_streams_real_model.bodies/00.response.sse", ContentType: "text/event-stream; charset=utf-8"},
	{Name: "provider-error", Recording: recorded + "errors/chat-bad-request.bodies/00.response.json", Status: 400, ContentType: "application/json"},
	{Name: "ollama", Recording: "../../testdata/fixtures/openai-compatible/test_ollama_local_native_output_uses_json_schema.bodies/00.response.json", ContentType: "application/json"},
}

func TestGolden(t *testing.T) {
	translatetest.RunGoldens(t, "testdata/chat", translatetest.Chat, goldenCases, func(t testing.TB, request []byte) translate.Translator {
		req, err := api.ParseChatRequest(request)
		if err != nil {
			t.Fatal(err)
		}
		return NewChat(translate.Target{Backend: "b", Provider: "openai", Model: "upstream-model", APIKey: "sk-provider"}, req)
	})
}
