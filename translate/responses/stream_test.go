package responses

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api/spec"
	"modelgate/translate/bedrock"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// bridgeStream runs a recorded provider stream through the provider's chat
// translator and the Responses stream encoder, as the server will.
func bridgeStream(t testing.TB, body string, newChat func(translate.Target, *Request) translate.Translator, contentType string, upstream []byte) []byte {
	t.Helper()
	r, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	tr := newChat(translate.Target{Model: "m"}, r)
	tr.ResponseHeaders(200, contentType)
	s := NewStream(r, "resp_test", 1700000000)
	var out []byte
	for _, c := range translatetest.RandomChunks(randSource(), upstream, 64) {
		chatOut, _ := tr.ResponseBody(c, false)
		out = append(out, s.Feed(chatOut, false)...)
	}
	chatOut, _ := tr.ResponseBody(nil, true)
	return append(out, s.Feed(chatOut, true)...)
}

// checkEvents validates every event against ResponseStreamEvent, that the
// event: line names its type, and that sequence numbers run from 0.
func checkEvents(t testing.TB, stream []byte) []map[string]any {
	t.Helper()
	var dec sse.Decoder
	var events []map[string]any
	for i, ev := range dec.Feed(stream) {
		spec.ValidateT(t, "ResponseStreamEvent", ev.Data)
		var m map[string]any
		json.Unmarshal(ev.Data, &m)
		if m["type"] != ev.Type || m["sequence_number"] != float64(i) {
			t.Errorf("event %d: event %q, type %v, sequence_number %v", i, ev.Type, m["type"], m["sequence_number"])
		}
		events = append(events, m)
	}
	if bytes.Contains(stream, []byte("[DONE]")) || dec.Pending() {
		t.Error("the stream has [DONE] or a partial event")
	}
	return events
}

func types(events []map[string]any) string {
	var out []string
	for _, e := range events {
		if t := e["type"].(string); len(out) == 0 || out[len(out)-1] != t {
			out = append(out, t)
		}
	}
	return strings.Join(out, " ")
}

func TestStreamTextThroughAnthropic(t *testing.T) {
	newChat := func(tg translate.Target, r *Request) translate.Translator {
		req, err := ToChat(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		return anthropic.NewChat(tg, req)
	}
	up := translatetest.ReadFile(t, "../../testdata/fixtures/anthropic/test_anthropic_model_thinking_part_stream.bodies/00.response.sse")
	events := checkEvents(t, bridgeStream(t, `{"model":"m","input":"How do I cross the street?","stream":true}`, newChat, "text/event-stream", up))
	want := "response.created response.in_progress response.output_item.added response.reasoning_summary_part.added " +
		"response.reasoning_summary_text.delta response.output_item.added response.content_part.added response.output_text.delta " +
		"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got := types(events); got != want {
		t.Errorf("event order\n got %s\nwant %s", got, want)
	}
	last := events[len(events)-1]["response"].(map[string]any)
	out, _ := json.Marshal(last)
	spec.ValidateT(t, "Response", out)
	if !strings.Contains(string(out), "crossing streets.") || last["usage"].(map[string]any)["output_tokens"] != 282.0 {
		t.Errorf("completed response = %s", out)
	}
}

func TestStreamToolCallsThroughBedrock(t *testing.T) {
	newChat := func(tg translate.Target, r *Request) translate.Translator {
		req, err := ToChat(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		return bedrock.NewChat(tg, req)
	}
	up := translatetest.ReadFile(t, "../../testdata/fixtures/bedrock/test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin")
	events := checkEvents(t, bridgeStream(t, `{"model":"m","input":"Temperature in Paris?","stream":true}`, newChat, "application/vnd.amazon.eventstream", up))
	var args string
	for _, e := range events {
		if e["type"] == "response.function_call_arguments.done" {
			args = e["arguments"].(string)
		}
	}
	if args != `{"city":"Paris"}` || events[len(events)-1]["type"] != "response.completed" {
		t.Errorf("arguments %q, last event %v", args, events[len(events)-1]["type"])
	}
}

func BenchmarkStreamTextDelta(b *testing.B) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	s := NewStream(r, "resp_b", 1)
	s.Feed([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n"), false)
	chunk := []byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]}` + "\n\n")
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Feed(chunk, false); len(out) == 0 {
			b.Fatal("no output")
		}
	}
}

func randSource() *rand.Rand { return rand.New(rand.NewPCG(11, 12)) }

// BenchmarkStreamDeltas is the per-chunk cost of the other common chunks:
// function call arguments (escaped JSON), reasoning, and text to escape.
func BenchmarkStreamDeltas(b *testing.B) {
	for _, bc := range []struct{ name, chunk string }{
		{"arguments", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Par"}}]},"finish_reason":null}]}`},
		{"reasoning", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":" the user"},"finish_reason":null}]}`},
		{"escaped-text", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"if a < b {\n\tfmt.Println(\"caf\u00e9\")\n}"},"finish_reason":null}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
			s := NewStream(r, "resp_b", 1)
			s.Feed([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`+"\n\n"), false)
			chunk := []byte("data: " + bc.chunk + "\n\n")
			b.ReportAllocs()
			for b.Loop() {
				if out := s.Feed(chunk, false); len(out) == 0 {
					b.Fatal("no output")
				}
			}
		})
	}
}
