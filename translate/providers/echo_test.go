package providers

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/responses"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// Every answer names the model the client asked for, whatever id the
// gateway sent the provider and whatever the provider answered with:
// clients compare the two (Claude Code drops the signed thinking of an
// answer of another model). The client asks for clientModel; each
// provider is sent target and answers naming answerModel, where its wire
// format names one, and neither may reach the client.
const (
	clientModel = "client-model"
	answerModel = "answer-id"
)

// The providers' answers, one JSON answer and one stream per wire format.
var (
	openaiChat = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"answer-id","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	// The usage on the last content chunk, as Mistral sends it, which a
	// client that asked for usage gets in a chunk of its own.
	openaiChatStream = sseData(
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"answer-id","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"answer-id","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
		`[DONE]`)
	openaiEmbeddings = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]}],"model":"answer-id","usage":{"prompt_tokens":1,"total_tokens":1}}`

	anthropicMessage       = `{"id":"msg_1","type":"message","role":"assistant","model":"answer-id","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
	anthropicStreamEvents  = anthropicEvents()
	anthropicMessageStream = anthropicSSE(anthropicStreamEvents)

	bedrockConverse       = `{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}`
	bedrockConverseStream = string(bytes.Join([][]byte{
		eventFrame("messageStart", `{"role":"assistant"}`),
		eventFrame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
		eventFrame("contentBlockStop", `{"contentBlockIndex":0}`),
		eventFrame("messageStop", `{"stopReason":"end_turn"}`),
		eventFrame("metadata", `{"usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}`),
	}, nil))
	bedrockInvokeStream = invokeFrames(anthropicStreamEvents)

	geminiAnswer = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2},"modelVersion":"answer-id","responseId":"r1"}`
	geminiStream = "data: " + `{"candidates":[{"content":{"role":"model","parts":[{"text":"H"}]},"index":0}],"modelVersion":"answer-id","responseId":"r1"}` + "\r\n\r\n" +
		"data: " + `{"candidates":[{"content":{"role":"model","parts":[{"text":"i"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2},"modelVersion":"answer-id","responseId":"r1"}` + "\r\n\r\n"

	cohereChat   = `{"id":"c1","finish_reason":"COMPLETE","message":{"role":"assistant","content":[{"type":"text","text":"Hi"}]},"usage":{"billed_units":{"input_tokens":1,"output_tokens":1},"tokens":{"input_tokens":1,"output_tokens":1}}}`
	cohereStream = "event: message-start\ndata: " + `{"id":"c1","type":"message-start","delta":{"message":{"role":"assistant","content":[]}}}` + "\n\n" +
		"event: content-start\ndata: " + `{"type":"content-start","index":0,"delta":{"message":{"content":{"type":"text","text":""}}}}` + "\n\n" +
		"event: content-delta\ndata: " + `{"type":"content-delta","index":0,"delta":{"message":{"content":{"text":"Hi"}}}}` + "\n\n" +
		"event: content-end\ndata: " + `{"type":"content-end","index":0}` + "\n\n" +
		"event: message-end\ndata: " + `{"type":"message-end","delta":{"finish_reason":"COMPLETE","usage":{"billed_units":{"input_tokens":1,"output_tokens":1},"tokens":{"input_tokens":1,"output_tokens":1}}}}` + "\n\n"

	response          = `{"id":"resp_up","object":"response","created_at":1,"status":"completed","model":"answer-id","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[],"logprobs":[]}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}`
	responseInProcess = `{"id":"resp_up","object":"response","created_at":1,"status":"in_progress","model":"answer-id","output":[]}`
	// A stream that breaks off after its text ends with response.failed,
	// the Response as the stream last showed it.
	responseStream = "event: response.created\ndata: " + `{"type":"response.created","sequence_number":0,"response":` + responseInProcess + `}` + "\n\n" +
		"event: response.in_progress\ndata: " + `{"type":"response.in_progress","sequence_number":1,"response":` + responseInProcess + `}` + "\n\n" +
		"event: response.completed\ndata: " + `{"type":"response.completed","sequence_number":2,"response":` + response + `}` + "\n\n"
	responseStreamCut = responseStream[:strings.Index(responseStream, "event: response.completed")]
)

func sseData(data ...string) string {
	var b []byte
	for _, d := range data {
		b = sse.AppendData(b, []byte(d))
	}
	return string(b)
}

// anthropicEvents are the Messages API's stream of one text block, as
// [type, data] pairs.
func anthropicEvents() [][2]string {
	return [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"answer-id","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"ping", `{"type":"ping"}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
}

func anthropicSSE(events [][2]string) string {
	var b []byte
	for _, e := range events {
		b = sse.AppendEvent(b, e[0], []byte(e[1]))
	}
	return string(b)
}

// invokeFrames are events as Bedrock's InvokeModel streams them: each in
// a chunk frame, base64 in its bytes.
func invokeFrames(events [][2]string) string {
	var b []byte
	for _, e := range events {
		b = append(b, eventFrame("chunk", `{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(e[1]))+`"}`)...)
	}
	return string(b)
}

// eventFrame encodes an AWS event-stream event frame.
func eventFrame(typ, payload string) []byte {
	var h []byte
	for _, kv := range [][2]string{{":message-type", "event"}, {":event-type", typ}, {":content-type", "application/json"}} {
		h = append(append(h, byte(len(kv[0]))), kv[0]...)
		h = binary.BigEndian.AppendUint16(append(h, 7), uint16(len(kv[1])))
		h = append(h, kv[1]...)
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(12+len(h)+len(payload)+4))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(append(b, h...), payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

const (
	jsonType        = "application/json"
	eventStreamType = "text/event-stream"
	awsStreamType   = "application/vnd.amazon.eventstream"
)

func TestAnswersNameTheClientsModel(t *testing.T) {
	for _, tt := range []struct {
		name, provider, endpoint string
		target                   string // the provider's id of the model
		stream                   bool
		contentType, answer      string
	}{
		{"openai chat", "openai", "chat", "upstream-id", false, jsonType, openaiChat},
		{"openai chat stream", "openai", "chat", "upstream-id", true, eventStreamType, openaiChatStream},
		{"azure chat", "azure", "chat", "upstream-id", false, jsonType, openaiChat},
		{"azure chat stream", "azure", "chat", "upstream-id", true, eventStreamType, openaiChatStream},
		{"mistral chat", "mistral", "chat", "upstream-id", false, jsonType, openaiChat},
		{"mistral chat stream", "mistral", "chat", "upstream-id", true, eventStreamType, openaiChatStream},
		{"anthropic chat", "anthropic", "chat", "upstream-id", false, jsonType, anthropicMessage},
		{"anthropic chat stream", "anthropic", "chat", "upstream-id", true, eventStreamType, anthropicMessageStream},
		{"vertex claude chat", "vertex", "chat", "claude-upstream-id", false, jsonType, anthropicMessage},
		{"vertex claude chat stream", "vertex", "chat", "claude-upstream-id", true, eventStreamType, anthropicMessageStream},
		{"gemini chat", "gemini", "chat", "upstream-id", false, jsonType, geminiAnswer},
		{"gemini chat stream", "gemini", "chat", "upstream-id", true, eventStreamType, geminiStream},
		{"vertex gemini chat", "vertex", "chat", "upstream-id", false, jsonType, geminiAnswer},
		{"vertex gemini chat stream", "vertex", "chat", "upstream-id", true, eventStreamType, geminiStream},
		{"bedrock chat", "bedrock", "chat", "upstream-id", false, jsonType, bedrockConverse},
		{"bedrock chat stream", "bedrock", "chat", "upstream-id", true, awsStreamType, bedrockConverseStream},
		{"cohere chat", "cohere", "chat", "upstream-id", false, jsonType, cohereChat},
		{"cohere chat stream", "cohere", "chat", "upstream-id", true, eventStreamType, cohereStream},

		{"anthropic messages", "anthropic", "messages", "upstream-id", false, jsonType, anthropicMessage},
		{"anthropic messages stream", "anthropic", "messages", "upstream-id", true, eventStreamType, anthropicMessageStream},
		{"vertex claude messages", "vertex", "messages", "claude-upstream-id", false, jsonType, anthropicMessage},
		{"vertex claude messages stream", "vertex", "messages", "claude-upstream-id", true, eventStreamType, anthropicMessageStream},
		{"bedrock claude messages", "bedrock", "messages", "us.anthropic.claude-upstream-id", false, jsonType, anthropicMessage},
		{"bedrock claude messages stream", "bedrock", "messages", "us.anthropic.claude-upstream-id", true, awsStreamType, bedrockInvokeStream},
		{"openai messages", "openai", "messages", "upstream-id", false, jsonType, openaiChat},
		{"openai messages stream", "openai", "messages", "upstream-id", true, eventStreamType, openaiChatStream},
		{"gemini messages stream", "gemini", "messages", "upstream-id", true, eventStreamType, geminiStream},

		{"openai responses", "openai", "responses", "upstream-id", false, jsonType, response},
		{"openai responses stream", "openai", "responses", "upstream-id", true, eventStreamType, responseStream},
		{"openai responses stream cut", "openai", "responses", "upstream-id", true, eventStreamType, responseStreamCut},
		{"azure responses stream", "azure", "responses", "upstream-id", true, eventStreamType, responseStream},
		{"anthropic responses", "anthropic", "responses", "upstream-id", false, jsonType, anthropicMessage},
		{"anthropic responses stream", "anthropic", "responses", "upstream-id", true, eventStreamType, anthropicMessageStream},
		{"gemini responses stream", "gemini", "responses", "upstream-id", true, eventStreamType, geminiStream},

		{"openai embeddings", "openai", "embeddings", "upstream-id", false, jsonType, openaiEmbeddings},
		{"azure embeddings", "azure", "embeddings", "upstream-id", false, jsonType, openaiEmbeddings},
		{"mistral embeddings", "mistral", "embeddings", "upstream-id", false, jsonType, openaiEmbeddings},
		{"gemini embeddings", "gemini", "embeddings", "gemini-embedding-001", false, jsonType, `{"embedding":{"values":[0.5,-0.25]}}`},
		{"vertex embeddings", "vertex", "embeddings", "text-embedding-005", false, jsonType,
			`{"predictions":[{"embeddings":{"statistics":{"truncated":false,"token_count":1},"values":[0.5,-0.25]}}]}`},
		{"bedrock embeddings", "bedrock", "embeddings", "amazon.titan-embed-text-v2:0", false, jsonType, `{"embedding":[0.5,-0.25],"inputTextTokenCount":1}`},
		{"cohere embeddings", "cohere", "embeddings", "embed-v4.0", false, jsonType,
			`{"id":"e1","embeddings":{"float":[[0.5,-0.25]]},"texts":["Hi"],"meta":{"billed_units":{"input_tokens":1}},"response_type":"embeddings_by_type"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := Lookup(tt.provider)
			if !ok {
				t.Fatalf("no provider %s", tt.provider)
			}
			tr := echoTranslator(t, p, tt.endpoint, tt.stream, translate.Target{Provider: tt.provider, Model: tt.target, APIKey: "k", Project: "p", Region: "us-east-1"})
			if _, err := tr.RequestBody(); err != nil {
				t.Fatal(err)
			}
			head := tr.ResponseHeaders(200, tt.contentType)
			if head.Stream != tt.stream {
				t.Fatalf("head %+v", head)
			}
			var out []byte
			if tt.stream {
				out = translatetest.Stream(t, tr, [][]byte{[]byte(tt.answer)})
			} else {
				var err error
				if out, err = tr.ResponseBody([]byte(tt.answer), true); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{tt.target, answerModel} {
				if bytes.Contains(out, []byte(id)) {
					t.Errorf("the answer names the provider's %s:\n%s", id, out)
				}
			}
			if n := modelsNamed(t, out, tt.stream); n == 0 {
				t.Errorf("the answer names no model:\n%s", out)
			}
		})
	}
}

// echoTranslator builds the translator of one exchange whose client asks
// for clientModel.
func echoTranslator(t *testing.T, p Provider, endpoint string, stream bool, tg translate.Target) translate.Translator {
	t.Helper()
	var body string
	switch endpoint {
	case "chat":
		body = `{"model":"client-model","messages":[{"role":"user","content":"Hi"}]`
		if stream {
			body += `,"stream":true,"stream_options":{"include_usage":true}`
		}
	case "messages":
		body = `{"model":"client-model","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]`
	case "responses":
		body = `{"model":"client-model","input":"Hi"`
	case "embeddings":
		req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"client-model","input":"Hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		return p.Embeddings(tg, req)
	}
	if stream && endpoint != "chat" {
		body += `,"stream":true`
	}
	body += "}"
	var tr translate.Translator
	var err error
	switch endpoint {
	case "chat":
		var req *api.ChatRequest
		if req, err = api.ParseChatRequest([]byte(body)); err == nil {
			tr = p.Chat(tg, req)
		}
	case "messages":
		var req *api.MessagesRequest
		if req, err = api.ParseMessagesRequest([]byte(body), false); err == nil {
			tr, err = p.MessagesTranslator(tg, req)
		}
	case "responses":
		var req *responses.Request
		if req, err = responses.ParseRequest([]byte(body)); err == nil {
			tr, err = p.ResponsesTranslator(tg, req, nil, "resp_1", 1700000000)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// modelsNamed checks that every model an answer names, at the top of a
// JSON body or stream event or in its message or response, is
// clientModel, and counts them.
func modelsNamed(t *testing.T, out []byte, stream bool) int {
	t.Helper()
	docs := [][]byte{out}
	if stream {
		var dec sse.Decoder
		docs = docs[:0]
		for _, ev := range dec.Feed(out) {
			if string(ev.Data) != "[DONE]" {
				docs = append(docs, ev.Data)
			}
		}
	}
	n := 0
	for _, doc := range docs {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%v: %s", err, doc)
		}
		models := []json.RawMessage{m["model"]}
		for _, k := range []string{"message", "response"} { // a message_start's, a Response event's
			var inner map[string]json.RawMessage
			if json.Unmarshal(m[k], &inner) == nil {
				models = append(models, inner["model"])
			}
		}
		for _, model := range models {
			if model == nil {
				continue
			}
			n++
			if string(model) != `"`+clientModel+`"` {
				t.Errorf("an answer names model %s: %s", model, doc)
			}
		}
	}
	return n
}
