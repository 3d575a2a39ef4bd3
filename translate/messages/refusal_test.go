package messages

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// The refusal answers are written by hand in the shape OpenAI's chat
// completions API documents for a refusal (message.refusal, and
// choices[].delta.refusal pieces in a stream, finish_reason stop): no
// recording of one is kept.
const (
	refusalText = "I'm sorry, I cannot assist with that request."
	refusalJSON = `{"id":"chatcmpl-r","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":null,"refusal":"` + refusalText + `","annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22}}`
	// refusalSSE is the stream of refusalJSON: the refusal in pieces,
	// then the usage chunk and [DONE].
	refusalSSE = `data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"refusal":"I cannot assist with that request."},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22}}` + "\n\n" +
		"data: [DONE]\n\n"
)

// newOpenAIBridge is the bridge of a one-turn Messages request onto
// OpenAI's chat translator, its answer's headers given.
func newOpenAIBridge(t *testing.T, stream bool) translate.Translator {
	t.Helper()
	body := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Help me with something bad."}]}`
	contentType := "application/json"
	if stream {
		body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
		contentType = "text/event-stream"
	}
	req, err := api.ParseMessagesRequest([]byte(body), false)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewBridge(openai.NewChat, translate.Target{Provider: "openai", Model: "gpt-4o"}, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.RequestBody(); err != nil {
		t.Fatal(err)
	}
	tr.ResponseHeaders(200, contentType)
	return tr
}

// A chat answer's refusal reaches a Messages client as a text block and
// stop_reason refusal, Anthropic's stop reason for a declined request,
// rather than as an empty message that ended its turn.
func TestBridgeRefusalJSON(t *testing.T) {
	out, err := newOpenAIBridge(t, false).ResponseBody([]byte(refusalJSON), true)
	if err != nil {
		t.Fatal(err)
	}
	checkMessage(t, 200, out)
	var got struct {
		Content    []map[string]any `json:"content"`
		StopReason string           `json:"stop_reason"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{{"type": "text", "text": refusalText}}
	if diff := cmp.Diff(want, got.Content); diff != "" || got.StopReason != "refusal" {
		t.Errorf("content (-want +got):\n%s\nstop_reason %q, want refusal\n%s", diff, got.StopReason, out)
	}
}

// A streamed refusal is a text block of its pieces, then message_delta
// with stop_reason refusal, however the stream is cut.
func TestBridgeRefusalStream(t *testing.T) {
	want := []string{
		"message_start",
		`content_block_start {"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"text":"I'm sorry, ","type":"text_delta"},"index":0,"type":"content_block_delta"}`,
		`content_block_delta {"delta":{"text":"I cannot assist with that request.","type":"text_delta"},"index":0,"type":"content_block_delta"}`,
		`content_block_stop {"index":0,"type":"content_block_stop"}`,
		`message_delta {"stop_reason":"refusal","stop_sequence":null}`,
		"message_stop",
	}
	for _, chunks := range [][][]byte{{[]byte(refusalSSE)}, translatetest.RandomChunks(rand.New(rand.NewPCG(1, 2)), []byte(refusalSSE), 16)} {
		out := translatetest.Stream(t, newOpenAIBridge(t, true), chunks)
		checkEvents(t, out)
		if diff := cmp.Diff(want, eventSummary(t, out)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	}
}

// eventSummary is each Messages event of a stream by its type: the
// content events whole, message_delta by its delta (its usage is the
// provider's), the others by type alone.
func eventSummary(t *testing.T, stream []byte) []string {
	t.Helper()
	var d sse.Decoder
	var out []string
	for _, ev := range d.Feed(stream) {
		switch {
		case strings.HasPrefix(ev.Type, "content_block_"):
			out = append(out, ev.Type+" "+string(ev.Data))
		case ev.Type == "message_delta":
			var m struct{ Delta json.RawMessage }
			if err := json.Unmarshal(ev.Data, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, ev.Type+" "+string(m.Delta))
		default:
			out = append(out, ev.Type)
		}
	}
	return out
}
