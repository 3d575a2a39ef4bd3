package responses

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api/spec"
	"modelgate/translate/openai"
)

// /v1/responses on a Mistral thinking model: its typed-parts answer (as
// Mistral's reasoning documentation shows it) becomes a reasoning item
// and the message, not a 502.
func TestMistralThinkingBridge(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"m","input":"2+2?"}`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := ToChat(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTranslator(openai.NewCompatibleChat(openai.CompatibleProviders()["mistral"])(translate.Target{Model: "magistral-medium-latest"}, req), r, nil, "resp_1", 1700000000)
	if _, err := tr.RequestBody(); err != nil {
		t.Fatal(err)
	}
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody([]byte(`{"id":"cmpl-1","object":"chat.completion","model":"magistral-medium-latest","created":1,"choices":[{"index":0,"message":{"role":"assistant",`+
		`"content":[{"type":"thinking","thinking":[{"type":"text","text":"2 and 2 make 4."}]},{"type":"text","text":"The answer is 4."}]},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	if !strings.Contains(string(out), `"text":"The answer is 4."`) || !strings.Contains(string(out), `"type":"reasoning"`) || !strings.Contains(string(out), "2 and 2 make 4.") {
		t.Errorf("response %s", out)
	}
}

// The prompt tokens Claude wrote to its cache reach a bridged Response's
// usage (input_tokens_details.cache_write_tokens), in JSON and streams,
// though chat usage has no place for them.
func TestBridgedCacheWrites(t *testing.T) {
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","input":"Hi"}`
		if stream {
			body = `{"model":"m","stream":true,"input":"Hi"}`
		}
		r, err := ParseRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req, err := ToChat(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		tr := NewTranslator(anthropic.NewChat(translate.Target{Model: "claude-sonnet-4-5"}, req), r, nil, "resp_1", 1700000000)
		if _, err := tr.RequestBody(); err != nil {
			t.Fatal(err)
		}
		const usage = `{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":2000}`
		var out []byte
		if stream {
			tr.ResponseHeaders(200, "text/event-stream")
			out, err = tr.ResponseBody([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":"+usage+"}}\n\n"+
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"+
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n"+
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), true)
		} else {
			tr.ResponseHeaders(200, "application/json")
			out, err = tr.ResponseBody([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":`+usage+`}`), true)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), `"input_tokens_details":{"cache_write_tokens":2000,"cached_tokens":100}`) || !strings.Contains(string(out), `"input_tokens":2110`) {
			t.Errorf("stream %v: %s", stream, out)
		}
	}
}
