package extproc

import (
	"encoding/base64"
	"fmt"
	"math"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/envoy/routing"
)

// endedDoor is a front door whose streams a provider can end early: the
// client's path, headers and request, and how its stream ends on an error.
type endedDoor struct {
	name, path string
	headers    []string
	body       string
	// errorEnd reports a client stream that ends with the door's error
	// event.
	errorEnd func(out string) bool
}

func endedDoors() []endedDoor {
	chatEnd := func(out string) bool {
		i := strings.LastIndex(out, "data: ")
		return i >= 0 && strings.HasPrefix(out[i:], `data: {"error":`) && !strings.Contains(out, "[DONE]")
	}
	return []endedDoor{
		{"chat", "/v1/chat/completions", []string{"authorization", "Bearer sk-client"},
			`{"model":"m","messages":[{"role":"user","content":"What is the capital of France?"}],"stream":true}`, chatEnd},
		{"messages", "/v1/messages", []string{"x-api-key", "sk-client", "anthropic-version", "2023-06-01"},
			`{"model":"m","max_tokens":500,"messages":[{"role":"user","content":"What is the capital of France?"}],"stream":true}`,
			func(out string) bool {
				i := strings.LastIndex(out, "event: ")
				return i >= 0 && strings.HasPrefix(out[i:], "event: error\n") && !strings.Contains(out, "message_stop")
			}},
		{"responses", "/v1/responses", []string{"authorization", "Bearer sk-client"},
			`{"model":"m","input":"What is the capital of France?","stream":true,"store":false}`,
			func(out string) bool {
				return strings.Contains(out, `"type":"response.failed"`) || strings.Contains(out, "event: error\n") && !strings.Contains(out, "response.completed")
			}},
	}
}

// anthropicEvents is a Messages stream as Anthropic sends it, message_start
// reporting 1 output token, to its last text delta: without message_delta
// and message_stop.
func anthropicEvents(words []string) [][]byte {
	out := [][]byte{
		sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`),
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	for _, w := range words {
		out = append(out, sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonString(w)+`}}`))
	}
	return out
}

// invokeChunks are Anthropic's events as Bedrock's InvokeModel streams
// them: event-stream chunk frames of base64 JSON.
func invokeChunks(events [][]byte) [][]byte {
	var out [][]byte
	for _, ev := range events {
		data := ev[strings.Index(string(ev), "data: ")+len("data: "):]
		data = []byte(strings.TrimSpace(string(data)))
		out = append(out, bedrockFrame("chunk", fmt.Sprintf(`{"bytes":%q}`, base64.StdEncoding.EncodeToString(data))))
	}
	return out
}

// streamCase is a provider's stream to one front door, cut before its
// end.
type streamCase struct {
	family      family
	contentType string
	chunks      [][]byte
}

// without is cases but those of the providers named.
func without(cases []streamCase, providers ...string) []streamCase {
	var out []streamCase
	for _, c := range cases {
		if !strings.Contains(" "+strings.Join(providers, " ")+" ", " "+c.family.provider+" ") {
			out = append(out, c)
		}
	}
	return out
}

// openAIResponseEvents is a Responses stream as OpenAI sends it, to its last
// text delta: without response.completed.
func openAIResponseEvents(words []string) [][]byte {
	out := [][]byte{
		sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"up","output":[]}}`),
		sseEvent("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`),
		sseEvent("response.content_part.added", `{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`),
	}
	for i, w := range words {
		out = append(out, sseEvent("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%s,"logprobs":[]}`, 3+i, jsonString(w))))
	}
	return out
}

// A stream the provider ends before its end (its terminal event never
// came) is charged the gateway's estimate of the text the client got, not
// the counts the provider reported on the way (Anthropic's output_tokens 1
// at message_start), and the client's stream ends with its API's error
// event: on every front door, whichever provider family served it, relayed
// or bridged.
func TestProviderEndedStreamEstimatedWithErrorEvent(t *testing.T) {
	words := []string{"The capital ", "of France ", "is Paris, ", "which lies ", "on the Seine ", "and has ", "about two ", "million people."}
	text := strings.Join(words, "")
	var chatStreams []streamCase
	for _, f := range families() {
		chunks := f.head()
		for i, w := range words {
			chunks = append(chunks, f.text(w, i+1))
		}
		chatStreams = append(chatStreams, streamCase{f, f.contentType, chunks})
	}
	var anthropic, bedrock family
	for _, c := range chatStreams {
		switch c.family.provider {
		case "anthropic":
			anthropic = c.family
		case "bedrock":
			bedrock = c.family
		}
	}
	perDoor := map[string][]streamCase{
		"chat": chatStreams,
		// The Messages API goes as sent to Anthropic and Claude on
		// Bedrock, and bridged to the rest.
		"messages": append(without(chatStreams, "anthropic"), streamCase{anthropic, "text/event-stream", anthropicEvents(words)},
			streamCase{family{name: "bedrock invoke", provider: "bedrock", backend: bedrock.backend, creds: bedrock.creds},
				"application/vnd.amazon.eventstream", invokeChunks(anthropicEvents(words))}),
		// The Responses API goes as sent to OpenAI and Azure, and
		// bridged to the rest.
		"responses": append(without(chatStreams, "openai", "azure"),
			streamCase{family{name: "openai responses", provider: "openai"}, "text/event-stream", openAIResponseEvents(words)}),
	}
	for _, door := range endedDoors() {
		for _, c := range perDoor[door.name] {
			t.Run(door.name+" on "+c.family.name, func(t *testing.T) {
				checkEndedStream(t, door, c, text)
			})
		}
	}
}

// An error event the provider ends its stream with (Anthropic's
// overloaded_error, Bedrock's exception, OpenAI's error chunk) reaches the
// client in its API's shape, and the exchange is charged the estimate of
// what the client got.
func TestProviderErrorEventEstimated(t *testing.T) {
	words := []string{"The capital ", "of France ", "is Paris, ", "which lies ", "on the Seine."}
	text := strings.Join(words, "")
	overloaded := sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	var anthropic, bedrock, openai family
	for _, f := range families() {
		switch f.name {
		case "anthropic":
			anthropic = f
		case "bedrock":
			bedrock = f
		case "openai":
			openai = f
		}
	}
	chatChunks := func(f family, end []byte) [][]byte {
		chunks := f.head()
		for i, w := range words {
			chunks = append(chunks, f.text(w, i+1))
		}
		return append(chunks, end)
	}
	doors := map[string]endedDoor{}
	for _, d := range endedDoors() {
		doors[d.name] = d
	}
	invoke := family{name: "bedrock invoke", provider: "bedrock", backend: bedrock.backend, creds: bedrock.creds}
	for _, tc := range []struct {
		door string
		c    streamCase
	}{
		{"chat", streamCase{anthropic, "text/event-stream", chatChunks(anthropic, overloaded)}},
		{"chat", streamCase{openai, "text/event-stream", chatChunks(openai, []byte("data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}\n\n"))}},
		{"chat", streamCase{bedrock, bedrock.contentType, chatChunks(bedrock, bedrockException("throttlingException", `{"message":"Too many requests"}`))}},
		{"messages", streamCase{anthropic, "text/event-stream", append(anthropicEvents(words), overloaded)}},
		{"messages", streamCase{invoke, "application/vnd.amazon.eventstream",
			append(invokeChunks(anthropicEvents(words)), bedrockException("throttlingException", `{"message":"Too many requests"}`))}},
		{"responses", streamCase{family{name: "openai responses", provider: "openai"}, "text/event-stream",
			append(openAIResponseEvents(words), sseEvent("error", `{"type":"error","sequence_number":99,"code":"server_error","message":"The server had an error","param":null}`))}},
	} {
		t.Run(tc.door+" on "+tc.c.family.name, func(t *testing.T) {
			checkEndedStream(t, doors[tc.door], tc.c, text)
		})
	}
}

// checkEndedStream plays a stream c to door, ended by the provider after
// its chunks, and checks that the client's stream ends with the door's
// error event and the record is the estimate of text.
func checkEndedStream(t *testing.T, door endedDoor, c streamCase, text string) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	usage := &usageLog{}
	b, creds := c.family.backend, c.family.creds
	b.Name, b.Provider = "b", c.family.provider
	if c.family.provider != "bedrock" {
		creds.APIKey = "provider-key"
	}
	model := "up"
	if c.family.name == "bedrock invoke" {
		model = "anthropic.claude-sonnet-4-5-20250929-v1:0"
	}
	s, err := New(Config{Metrics: m, Routing: routing.Table{Backends: []routing.Backend{b},
		Models: []routing.Model{{ID: "m", Deployments: []routing.Deployment{{Backend: "b", Model: model}}}}},
		Credentials: map[string]Credentials{"b": creds}}, stubAuth{}, usage)
	if err != nil {
		t.Fatal(err)
	}
	h := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: hdrs(false, append([]string{":method", "POST", ":path", door.path, "x-request-id", "r1"}, door.headers...)...)}}
	msgs := []*extprocv3.ProcessingRequest{h, reqBody(door.body), respHeaders(false, ":status", "200", "content-type", c.contentType)}
	for _, ch := range c.chunks {
		msgs = append(msgs, respBody(string(ch), false))
	}
	msgs = append(msgs, respBody("", true)) // the provider ends the stream cleanly, early
	out := play(t, s, false, msgs...)
	var client strings.Builder
	for i, r := range out[3:] {
		if bm := r.GetResponseBody().GetResponse().GetBodyMutation(); bm != nil {
			client.Write(bm.GetBody())
		} else { // the chunk as it came
			client.Write(msgs[3+i].GetResponseBody().GetBody())
		}
	}
	if !door.errorEnd(client.String()) {
		t.Errorf("the client's stream does not end with an error event:\n%s", tail(client.String(), 600))
	}
	rec := usage.only(t)
	tokens := float64(len(text)) / bytesPerToken
	if !rec.Estimated || math.Abs(float64(rec.CompletionTokens)-tokens) > 0.25*tokens+1 {
		t.Errorf("record: %d output tokens (estimated %v), status %d; want ~%.0f estimated for the text the client got",
			rec.CompletionTokens, rec.Estimated, rec.Status, tokens)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
