package responses

import (
	"path/filepath"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/translatetest"
)

type chatFactory func(translate.Target, *api.ChatRequest) translate.Translator

// goldenCases run recorded provider traffic through the provider's chat
// translator and the bridge; testdata/<case>.json or .sse is the Response
// or the event stream the client gets.
var goldenCases = []struct {
	name, recording, contentType string
	chat                         chatFactory
	stream                       bool
}{
	{"anthropic-text", "anthropic/test_anthropic_model_instructions.bodies/00.response.json", "application/json", anthropic.NewChat, false},
	{"anthropic-tools", "anthropic/test_multiple_parallel_tool_calls.bodies/00.response.json", "application/json", anthropic.NewChat, false},
	{"anthropic-thinking-stream", "anthropic/test_anthropic_model_thinking_part_stream.bodies/00.response.sse", "text/event-stream", anthropic.NewChat, true},
	{"gemini-text", "gemini/test_google_model.bodies/00.response.json", "application/json", gemini.NewChat, false},
	{"gemini-tool-stream", "gemini/test_google_model_iter_stream.bodies/00.response.sse", "text/event-stream", gemini.NewChat, true},
	{"bedrock-text", "bedrock/test_bedrock_model.bodies/00.response.json", "application/json", bedrock.NewChat, false},
	{"bedrock-tool-stream", "bedrock/test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin", "application/vnd.amazon.eventstream", bedrock.NewChat, true},
	{"cohere-text", "cohere/test_request_simple_success_with_vcr.bodies/00.response.json", "application/json", cohere.NewChat, false},
	{"openai-tools", "openai/chat/chat-tools.bodies/00.response.json", "application/json", openai.NewChat, false},
	{"openai-stream", "openai/chat/chat-streaming.bodies/00.response.sse", "text/event-stream", openai.NewChat, true},
}

func TestBridgeGoldens(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","input":"Hello!","stream":false}`
			if tc.stream {
				body = `{"model":"m","input":"Hello!","stream":true}`
			}
			r, err := ParseRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			chatReq, err := ToChat(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			tr := NewTranslator(tc.chat(translate.Target{Model: "upstream-model"}, chatReq), r, nil, "resp_golden", 1700000000)
			if _, err := tr.RequestBody(); err != nil {
				t.Fatal(err)
			}
			tr.ResponseHeaders(200, tc.contentType)
			up := translatetest.ReadFile(t, "../../testdata/fixtures/"+tc.recording)
			var got []byte
			if tc.stream {
				got = translatetest.Stream(t, tr, [][]byte{up})
				checkEvents(t, got)
			} else {
				if got, err = tr.ResponseBody(up, true); err != nil {
					t.Fatal(err)
				}
				spec.ValidateT(t, "Response", got)
			}
			if len(tr.Conversation()) < 2 {
				t.Errorf("conversation has %d items, want the input and the output", len(tr.Conversation()))
			}
			translatetest.Golden(t, goldenPath(tc.name, tc.stream), got)
		})
	}
}

// goldenPath is testdata/<name>.json, or .sse for a stream.
func goldenPath(name string, stream bool) string {
	if stream {
		return filepath.Join("testdata", name+".sse")
	}
	return filepath.Join("testdata", name+".json")
}
