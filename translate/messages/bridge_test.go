package messages

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

const fixtures = "../../testdata/fixtures/"

// bridgeCase is a Messages request (testdata/<name>/request.json) through
// a provider's chat translator, answered with a recorded (or, for Cohere,
// hand-written) provider answer.
type bridgeCase struct {
	name, provider, recording, contentType string
	chat                                   func(translate.Target, *api.ChatRequest) translate.Translator
}

var bridgeCases = []bridgeCase{
	{"openai-stream", "openai", fixtures + "openai/chat/chat-streaming.bodies/00.response.sse", "text/event-stream", openai.NewChat},
	{"openai-stream-tool-calls", "openai", fixtures + "openai/chat/test_run_stream_sync_streams_real_model.bodies/00.response.sse", "text/event-stream", openai.NewChat},
	{"openai-json", "openai", fixtures + "openai/chat/chat-basic.bodies/00.response.json", "application/json", openai.NewChat},
	{"gemini-stream-tool-call", "gemini", fixtures + "gemini/test_google_model_iter_stream.bodies/00.response.sse", "text/event-stream", gemini.NewChat},
	{"gemini-stream-thought-signature", "gemini", fixtures + "gemini/test_google_streaming_tool_call_thought_signature.bodies/00.response.sse", "text/event-stream", gemini.NewChat},
	{"bedrock-stream", "bedrock", fixtures + "bedrock/test_bedrock_model_stream.bodies/00.response.eventstream.bin", "application/vnd.amazon.eventstream", bedrock.NewChat},
	{"bedrock-stream-tool-calls", "bedrock", fixtures + "bedrock/test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin", "application/vnd.amazon.eventstream", bedrock.NewChat},
	{"bedrock-stream-thinking", "bedrock", fixtures + "bedrock/test_bedrock_model_thinking_part_stream.bodies/00.response.eventstream.bin", "application/vnd.amazon.eventstream", bedrock.NewChat},
	{"cohere-stream-tool-calls", "cohere", "../cohere/testdata/chat/stream-tool-calls/provider.sse", "text/event-stream", cohere.NewChat},
	{"openai-error", "openai", fixtures + "openai/errors/chat-bad-request.bodies/00.response.json", "application/json", openai.NewChat},
}

// TestBridgeGoldens plays each case through the bridge and checks the
// upstream request (upstream.json) and the client's answer (client.json
// or client.sse) against their goldens, every stream against the Messages
// API's documented event sequence (checkEvents), also cut at random
// points.
func TestBridgeGoldens(t *testing.T) {
	for _, tc := range bridgeCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.name)
			newTr := func() translate.Translator {
				req, err := api.ParseMessagesRequest(translatetest.ReadFile(t, filepath.Join(dir, "request.json")), false)
				if err != nil {
					t.Fatal(err)
				}
				tr, err := NewBridge(tc.chat, translate.Target{Backend: "b", Provider: tc.provider, Model: "upstream-model", APIKey: "k"}, req)
				if err != nil {
					t.Fatal(err)
				}
				tr.(*bridge).id = "msg_golden"
				return tr
			}
			tr := newTr()
			up, err := tr.RequestBody()
			translatetest.Golden(t, filepath.Join(dir, "upstream.json"), translatetest.UpstreamJSON(t, up, err))
			recording := translatetest.ReadFile(t, tc.recording)
			status := 200
			if strings.Contains(tc.name, "error") {
				status = 400
			}
			head := tr.ResponseHeaders(status, tc.contentType)
			if !head.Stream {
				out, err := tr.ResponseBody(recording, true)
				if err != nil {
					t.Fatal(err)
				}
				translatetest.Golden(t, filepath.Join(dir, "client.json"), out)
				checkMessage(t, status, out)
				return
			}
			out := translatetest.Stream(t, tr, [][]byte{recording})
			translatetest.Golden(t, filepath.Join(dir, "client.sse"), out)
			checkEvents(t, out)
			r := rand.New(rand.NewPCG(uint64(len(recording)), 2))
			for range 3 {
				again := newTr()
				again.RequestBody() //nolint:errcheck // succeeded above
				again.ResponseHeaders(status, tc.contentType)
				if got := translatetest.Stream(t, again, translatetest.RandomChunks(r, recording, 64)); string(got) != string(out) {
					t.Fatalf("a stream cut at random points gives other events:\n%s\nwant:\n%s", got, out)
				}
			}
		})
	}
}

// checkMessage requires a message, or an error, in the Messages API's
// shape.
func checkMessage(t *testing.T, status int, out []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if status >= 400 {
		e, _ := m["error"].(map[string]any)
		if m["type"] != "error" || e["type"] == nil || e["message"] == nil {
			t.Errorf("not a Messages API error: %s", out)
		}
		return
	}
	for _, k := range []string{"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"} {
		if _, ok := m[k]; !ok {
			t.Errorf("the message has no %s: %s", k, out)
		}
	}
	for _, b := range m["content"].([]any) {
		checkBlock(t, b.(map[string]any), false)
	}
}

// blockMembers are the members a content block of each type has, whole
// (in a message) or as a stream starts it (its text empty, its input {}).
var blockMembers = map[string][]string{
	"text":              {"type", "text"},
	"thinking":          {"type", "thinking", "signature"},
	"redacted_thinking": {"type", "data"},
	"tool_use":          {"type", "id", "name", "input"},
}

func checkBlock(t *testing.T, b map[string]any, started bool) {
	t.Helper()
	typ, _ := b["type"].(string)
	want, ok := blockMembers[typ]
	if !ok {
		t.Errorf("a block of type %q", typ)
		return
	}
	for _, k := range want {
		if _, ok := b[k]; !ok {
			t.Errorf("a %s block without %s: %v", typ, k, b)
		}
	}
	if started && (typ == "text" && b["text"] != "" || typ == "thinking" && b["thinking"] != "") {
		t.Errorf("a %s block starts with content: %v", typ, b)
	}
}

// deltaTypes are the deltas each block type takes.
var deltaTypes = map[string][]string{
	"text":     {"text_delta"},
	"thinking": {"thinking_delta", "signature_delta"},
	"tool_use": {"input_json_delta"},
}

// checkEvents checks a stream against the Messages API's documented
// events: message_start (a message without content), then each content
// block's content_block_start (its index the next), its deltas of the
// block's types and content_block_stop, one block at a time; then one
// message_delta (stop_reason, usage) and message_stop, last; ping
// anywhere; or an error event, last.
func checkEvents(t *testing.T, out []byte) {
	t.Helper()
	var d sse.Decoder
	events := d.Feed(out)
	state, open, next := "start", "", 0
	for i, ev := range events {
		var data map[string]any
		if err := json.Unmarshal(ev.Data, &data); err != nil || data["type"] != ev.Type {
			t.Fatalf("event %d (%s): data %s", i, ev.Type, ev.Data)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("event %d (%s) %s: %s", i, ev.Type, fmt.Sprintf(format, args...), ev.Data)
		}
		index := -1
		if f, ok := data["index"].(float64); ok {
			index = int(f)
		}
		switch ev.Type {
		case "ping":
		case "error":
			if i != len(events)-1 {
				fail("before the end")
			}
			return
		case "message_start":
			m, _ := data["message"].(map[string]any)
			if state != "start" || m == nil || m["role"] != "assistant" || len(m["content"].([]any)) != 0 || m["usage"] == nil {
				fail("in state %s", state)
			}
			state = "blocks"
		case "content_block_start":
			b, _ := data["content_block"].(map[string]any)
			if state != "blocks" || open != "" || index != next || b == nil {
				fail("in state %s, %q open, index %d of %d", state, open, index, next)
			}
			checkBlock(t, b, true)
			open = b["type"].(string)
		case "content_block_delta":
			delta, _ := data["delta"].(map[string]any)
			if open == "" || index != next || delta == nil || !slices.Contains(deltaTypes[open], delta["type"].(string)) {
				fail("with %q open at %d", open, next)
			}
		case "content_block_stop":
			if open == "" || index != next {
				fail("with %q open at %d", open, next)
			}
			open, next = "", next+1
		case "message_delta":
			delta, _ := data["delta"].(map[string]any)
			if state != "blocks" || open != "" || delta == nil || delta["stop_reason"] == nil || data["usage"] == nil {
				fail("in state %s, %q open", state, open)
			}
			state = "delta"
		case "message_stop":
			if state != "delta" || i != len(events)-1 {
				fail("in state %s", state)
			}
			state = "stopped"
		default:
			fail("unknown")
		}
	}
	if state != "stopped" {
		t.Fatalf("the stream ended in state %s", state)
	}
}
