package openai

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// goldenCases drive the translator with recorded upstream traffic. Each
// case folder holds the client request (request.json), the upstream body
// the gateway sends (upstream.json) and what the client gets
// (client.json or client.sse); -update rewrites the last two.
var goldenCases = []struct {
	name, recording string
	status          int
	contentType     string
}{
	{"basic", "openai/chat/chat-basic.bodies/00.response.json", 200, "application/json"},
	{"tools", "openai/chat/chat-tools.bodies/00.response.json", 200, "application/json"},
	{"stream", "openai/chat/chat-streaming-detailed-usage.bodies/00.response.sse", 200, "text/event-stream; charset=utf-8"},
	{"stream-include-usage", "openai/chat/chat-streaming-detailed-usage.bodies/00.response.sse", 200, "text/event-stream; charset=utf-8"},
	{"stream-tool-calls", "openai/chat/test_run_stream_sync_streams_real_model.bodies/00.response.sse", 200, "text/event-stream; charset=utf-8"},
	{"provider-error", "openai/errors/chat-bad-request.bodies/00.response.json", 400, "application/json"},
	{"ollama", "openai-compatible/test_ollama_local_native_output_uses_json_schema.bodies/00.response.json", 200, "application/json"},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "chat", tc.name)
			req, err := api.ParseChatRequest(translatetest.ReadFile(t, filepath.Join(dir, "request.json")))
			if err != nil {
				t.Fatal(err)
			}
			tr := NewChat(translate.Target{Backend: "b", Provider: "openai", Model: "upstream-model", APIKey: "sk-provider"}, req)
			up, err := tr.RequestBody()
			if err != nil {
				t.Fatal(err)
			}
			var indented bytes.Buffer
			json.Indent(&indented, up.Body, "", "  ")
			head := tr.ResponseHeaders(tc.status, tc.contentType)
			out, err := tr.ResponseBody(translatetest.ReadFile(t, "../../testdata/fixtures/"+tc.recording), !head.Stream)
			if err != nil {
				t.Fatal(err)
			}
			if head.Stream {
				end, _ := tr.ResponseBody(nil, true)
				out = append(out, end...)
			}
			clientFile := "client.json"
			if strings.HasPrefix(tc.contentType, "text/event-stream") {
				clientFile = "client.sse"
			}
			translatetest.Golden(t, filepath.Join(dir, "upstream.json"), append(indented.Bytes(), '\n'))
			translatetest.Golden(t, filepath.Join(dir, clientFile), out)
		})
	}
}
