package extproc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/envoy/routing"
	"modelgate/translate"
)

// A family is one provider's stream format, scripted as the provider
// documents it: what it sends before the text, and a chunk of text.
type family struct {
	name, provider, contentType string
	backend                     routing.Backend
	creds                       Credentials
	head                        func() [][]byte
	text                        func(s string, i int) []byte
}

// Compact and spaced JSON: Python servers write a space after each colon
// and comma, and an OpenAI-compatible server's chunks reach the client as
// it wrote them.
func openAIChunk(spaced bool) func(string, int) []byte {
	return func(s string, _ int) []byte {
		c := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":` +
			jsonString(s) + `},"finish_reason":null}]}`
		if spaced {
			c = strings.NewReplacer(`":`, `": `, `,"`, `, "`).Replace(c)
		}
		return []byte("data: " + c + "\n\n")
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func sseEvent(event, data string) []byte {
	return []byte("event: " + event + "\ndata: " + data + "\n\n")
}

// bedrockFrame is one AWS event-stream frame of an event.
func bedrockFrame(typ, payload string) []byte {
	return eventStreamFrame([][2]string{{":message-type", "event"}, {":event-type", typ}, {":content-type", "application/json"}}, payload)
}

// bedrockException is an AWS event-stream exception frame.
func bedrockException(typ, payload string) []byte {
	return eventStreamFrame([][2]string{{":message-type", "exception"}, {":exception-type", typ}, {":content-type", "application/json"}}, payload)
}

// eventStreamFrame is one AWS event-stream frame: its headers (string
// values), payload and CRCs.
func eventStreamFrame(headers [][2]string, payload string) []byte {
	var h []byte
	for _, kv := range headers {
		h = append(h, byte(len(kv[0])))
		h = append(h, kv[0]...)
		h = append(h, 7)
		h = binary.BigEndian.AppendUint16(h, uint16(len(kv[1])))
		h = append(h, kv[1]...)
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(12+len(h)+len(payload)+4))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(append(b, h...), payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func families() []family {
	none := func() [][]byte { return nil }
	return []family{
		{name: "openai", provider: "openai", contentType: "text/event-stream", head: none, text: openAIChunk(false)},
		{name: "openai, spaced JSON", provider: "openai", contentType: "text/event-stream", head: none, text: openAIChunk(true)},
		{name: "mistral, spaced JSON", provider: "mistral", contentType: "text/event-stream", head: none, text: openAIChunk(true)},
		{name: "groq", provider: "groq", contentType: "text/event-stream", head: none, text: openAIChunk(false)},
		{name: "azure", provider: "azure", contentType: "text/event-stream", head: none, text: openAIChunk(false),
			backend: routing.Backend{APIVersion: "2024-10-21"}},
		// message_start reports output_tokens 1 before any text.
		{name: "anthropic", provider: "anthropic", contentType: "text/event-stream",
			head: func() [][]byte {
				return [][]byte{
					sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}`),
					sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
				}
			},
			text: func(s string, _ int) []byte {
				return sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonString(s)+`}}`)
			}},
		// Every chunk reports the tokens so far, lagging the text.
		{name: "gemini", provider: "gemini", contentType: "text/event-stream", head: none,
			text: func(s string, i int) []byte {
				return []byte(`data: {"candidates":[{"content":{"parts":[{"text":` + jsonString(s) + `}],"role":"model"},"index":0}],` +
					fmt.Sprintf(`"usageMetadata":{"promptTokenCount":25,"candidatesTokenCount":%d,"totalTokenCount":%d},"modelVersion":"up"}`, i, 25+i) + "\r\n\r\n")
			}},
		{name: "cohere", provider: "cohere", contentType: "text/event-stream",
			head: func() [][]byte {
				return [][]byte{
					sseEvent("message-start", `{"id":"m1","type":"message-start","delta":{"message":{"role":"assistant","content":[],"tool_plan":"","tool_calls":[],"citations":[]}}}`),
					sseEvent("content-start", `{"type":"content-start","index":0,"delta":{"message":{"content":{"type":"text","text":""}}}}`),
				}
			},
			text: func(s string, _ int) []byte {
				return sseEvent("content-delta", `{"type":"content-delta","index":0,"delta":{"message":{"content":{"text":`+jsonString(s)+`}}}}`)
			}},
		{name: "bedrock", provider: "bedrock", contentType: "application/vnd.amazon.eventstream",
			backend: routing.Backend{Region: "us-east-1", BaseURL: "https://bedrock-runtime.us-east-1.amazonaws.com"},
			creds:   Credentials{AWS: translate.AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}},
			head:    func() [][]byte { return [][]byte{bedrockFrame("messageStart", `{"role":"assistant"}`)} },
			text: func(s string, _ int) []byte {
				return bedrockFrame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":`+jsonString(s)+`}}`)
			}},
	}
}

// receivedText is the generated text a client read in a chat stream: the
// contents of its chunks' deltas.
func receivedText(t *testing.T, out []*extprocv3.ProcessingResponse) string {
	t.Helper()
	var text strings.Builder
	for _, r := range out {
		body := r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()
		for _, line := range bytes.Split(body, []byte("\n")) {
			data, ok := bytes.CutPrefix(line, []byte("data: "))
			if !ok || bytes.Equal(data, []byte("[DONE]")) {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(data, &c); err != nil {
				t.Fatalf("the client got %s: %v", data, err)
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
	}
	return text.String()
}

// For every provider family, a stream the client leaves after a few
// events is charged for the text it received, within 25%, whatever the
// provider had reported by then (Anthropic's 1 output token at
// message_start, Gemini's lagging counts) and whatever the JSON's spacing.
func TestLeftStreamChargedForItsText(t *testing.T) {
	words := []string{"The capital ", "of France ", "is Paris, ", "which lies ", "on the Seine ", "and has ", "about two ", "million people."}
	for _, f := range families() {
		for _, leaveAfter := range []int{1, 3, len(words)} {
			t.Run(fmt.Sprintf("%s, %d chunks", f.name, leaveAfter), func(t *testing.T) {
				m, err := NewMetrics(prometheus.NewRegistry())
				if err != nil {
					t.Fatal(err)
				}
				usage := &usageLog{}
				b, creds := f.backend, f.creds
				b.Name, b.Provider = "b", f.provider
				if f.provider != "bedrock" {
					creds.APIKey = "provider-key"
				}
				s, err := New(Config{Metrics: m, Routing: routing.Table{Backends: []routing.Backend{b},
					Models: []routing.Model{{ID: "m", Deployments: []routing.Deployment{{Backend: "b", Model: "up"}}}}},
					Credentials: map[string]Credentials{"b": creds}}, stubAuth{}, usage)
				if err != nil {
					t.Fatal(err)
				}
				msgs := []*extprocv3.ProcessingRequest{reqHeaders(),
					reqBody(`{"model":"m","messages":[{"role":"user","content":"What is the capital of France?"}],"stream":true}`),
					respHeaders(false, ":status", "200", "content-type", f.contentType)}
				for _, h := range f.head() {
					msgs = append(msgs, respBody(string(h), false))
				}
				for i, w := range words[:leaveAfter] {
					msgs = append(msgs, respBody(string(f.text(w, i+1)), false))
				}
				out := play(t, s, true, msgs...) // then the client leaves: Envoy cancels the stream
				got := receivedText(t, out)
				want := strings.Join(words[:leaveAfter], "")
				if got != want {
					t.Fatalf("the client read %q, want %q", got, want)
				}
				rec := usage.only(t)
				tokens := float64(len(got)) / bytesPerToken
				if !rec.Estimated || math.Abs(float64(rec.CompletionTokens)-tokens) > 0.25*tokens+1 {
					t.Errorf("record: %d output tokens (estimated %v) for %d bytes of text (~%.0f tokens)",
						rec.CompletionTokens, rec.Estimated, len(got), tokens)
				}
			})
		}
	}
}

// A JSON answer that reports no usage is charged for its text, chat's and
// the Responses API's alike.
func TestUsagelessAnswerChargedForItsText(t *testing.T) {
	text := strings.Repeat("Paris is the capital of France. ", 10)
	for _, tt := range []struct {
		name, path, request, answer string
	}{
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Where?"}]}`,
			`{"id":"c","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":` +
				jsonString(text) + `},"finish_reason":"stop"}]}`},
		{"chat, spaced JSON", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Where?"}]}`,
			`{"id": "c", "object": "chat.completion", "created": 1, "model": "up", "choices": [{"index": 0, "message": {"role": "assistant", "content": ` +
				jsonString(text) + `}, "finish_reason": "stop"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, usage, _ := newFaultServer(t)
			req := tt.request
			req = strings.Replace(req, `"model":"m"`, `"model":"gpt-x"`, 1)
			play(t, s, false, reqHeaders(), reqBody(req), respHeaders(false, ":status", "200", "content-type", "application/json"),
				respBody(tt.answer, true))
			rec := usage.only(t)
			tokens := float64(len(text)) / bytesPerToken
			if !rec.Estimated || math.Abs(float64(rec.CompletionTokens)-tokens) > 0.25*tokens {
				t.Errorf("record %+v: want ~%.0f output tokens, estimated", rec, tokens)
			}
		})
	}
}
