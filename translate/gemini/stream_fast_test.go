package gemini

import (
	"bytes"
	"strings"
	"testing"

	"modelgate/translate/translatetest"
)

// The one-pass reading of stream events (event) must translate every
// event exactly as decoding it with encoding/json (decodedEvent) does:
// the same output and the same state after it.

// recordedEvents are the data of every recorded stream event.
func recordedEvents(t testing.TB) [][]byte {
	var events [][]byte
	for _, f := range []string{"test_google_model_stream.bodies/00", "test_google_model_iter_stream.bodies/00", "test_google_model_iter_stream.bodies/01",
		"test_google_model_iter_stream.bodies/02", "test_google_streaming_tool_call_thought_signature.bodies/00", "test_google_streaming_tool_call_thought_signature.bodies/01"} {
		for _, line := range bytes.Split(translatetest.ReadFile(t, recorded+f+".response.sse"), []byte("\n")) {
			if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data: ")); ok {
				events = append(events, data)
			}
		}
	}
	if len(events) < 10 {
		t.Fatalf("%d recorded events", len(events))
	}
	return events
}

// edgeEvents are events of unusual shapes, some for the fast road, most
// for encoding/json's.
var edgeEvents = []string{
	`{}`,
	` {"candidates":[]} `,
	`{"candidates":[{}]}`,
	`{"candidates":[{"content":{}}]}`,
	`{"candidates":[{"content":{"parts":[]}}]}`,
	`{"candidates":[{"content":{"parts":[{}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":""}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b","thought":true},{"text":"c"},{"text":"d","thought":false}]},"index":1},{"content":{"parts":[{"text":"x"}]},"index":-2,"finishReason":"MAX_TOKENS"}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"","thought":true}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"think","thought":true},{"functionCall":{"name":"f"}}]},"finishReason":"STOP"}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"t"},{"functionCall":{"name":"f","args":{ "a" : [1, 2.5e3, true, null, "\u00e9"] }}},{"functionCall":{"id":"i\"d","name":"g<h>","args":null}}]},"finishReason":"SAFETY"}]}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{},"thoughtSignature":"c2ln"},{"functionCall":{"name":""},"thoughtSignature":"not base64!"},{"functionCall":{"id":""},"thoughtSignature":""}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"x"},"text":"ignored","thought":true}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"\u003cb\u003e \\ \/ \b\f\n\r\t \u0000\u001f\u007f \u2028\u2029 \ud83d\ude00 \ud83d \ude00x \ud83d\u0041 & < > \" é ` + "\u2028\xff\xc3(\xed\xa0\x80 \U0001F600" + `"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model","extra":{"deep":[[[{"x":[]}]]]}},"safetyRatings":[{"category":"HARM","probability":"NEGLIGIBLE"}],"avgLogprobs":-0.5e-3,"citationMetadata":null}],"promptFeedback":{},"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4,"thoughtsTokenCount":5,"totalTokenCount":12,"cachedContentTokenCount":1,"promptTokensDetails":[{"modality":"TEXT","tokenCount":3}]},"modelVersion":"m\u00e9<1>","responseId":"id\"1"}`,
	`{"usageMetadata":{}}`,
	`{"usageMetadata":{"promptTokenCount":-1,"totalTokenCount":0}}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"ST\u004fP"}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"OTHER\u00e9"}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"RECITATION"}]}`,
	// For encoding/json: other spellings, duplicates, nulls, types, errors.
	`{"Candidates":[{"content":{"parts":[{"text":"a"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"TEXT":"a"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"te\u0078t":"a"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"ſext":"a"}]}}]}`,
	`{"candidates":[{"content":{"Parts":[{"text":"a"}]}}]}`,
	`{"candidates":[{"Index":2}]}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{"NAME":"f"}}]}}]}`,
	`{"usageMetadata":{"PromptTokenCount":3}}`,
	`{"candidates":[{"content":{"parts":[{"text":"a","text":"b"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"candidates":[{"content":{"parts":[{"text":"b"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]},"content":{"parts":[{"thought":true}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":null}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"thought":null,"text":"a"}]}}]}`,
	`{"candidates":[{"index":null}]}`,
	`{"candidates":[{"index":1.0}]}`,
	`{"candidates":[{"index":1e2}]}`,
	`{"candidates":[{"index":99999999999999999999}]}`,
	`{"usageMetadata":{"promptTokenCount":1.5}}`,
	`{"usageMetadata":{"promptTokenCount":"1"}}`,
	`{"modelVersion":null,"responseId":1}`,
	`{"error":{"code":500,"message":"x","status":"INTERNAL"}}`,
	`{"Error":{"code":500,"message":"x","status":"INTERNAL"}}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"error":null}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]} x`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}] "x":1}`,
	`{"candidates":[{"content":{"parts":[{"text":"a\x"}]}}]}`,
	"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\tb\"}]}}]}",
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}},]}`,
	`{"x":01}`,
	`{"x":-}`,
	`{"x":1.}`,
	`{"x":1e}`,
	`{"x":tru}`,
	`{"x":nul}`,
	`{"x":[1,]}`,
	`{"x":{"a"}}`,
	`{"x":{"a":1,}}`,
	`{"x":[}`,
	`{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	`{"x":` + strings.Repeat(`{"a":`, 63) + `1` + strings.Repeat("}", 63) + `}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}}`,
	`[{"candidates":[]}]`,
	``,
}

// newStream is a stream translator that has seen its headers.
func newStream(t testing.TB) *chat {
	c := newChat(t, streamReq)
	c.ResponseHeaders(200, "text/event-stream")
	return c
}

// sameAsDecoding translates events both ways and compares.
func sameAsDecoding(t testing.TB, events ...[]byte) {
	t.Helper()
	fast, slow := newStream(t), newStream(t)
	var got, want []byte
	for _, ev := range events {
		if !fast.st.done {
			got = fast.event(got, ev)
		}
		if !slow.st.done {
			want = slow.decodedEvent(want, ev)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("events %q\none pass: %s\ndecoded:  %s", events, got, want)
	}
	f, s := fast.st, slow.st
	if f.id != s.id || f.model != s.model || f.started != s.started || f.calls != s.calls || f.finished != s.finished || f.done != s.done || fast.usage != slow.usage {
		t.Fatalf("events %q: state %+v %+v, want %+v %+v", events, f, fast.usage, s, slow.usage)
	}
}

func TestFastEventsMatchDecoding(t *testing.T) {
	recordedEv := recordedEvents(t)
	all := append([][]byte{}, recordedEv...)
	for _, ev := range edgeEvents {
		all = append(all, []byte(ev))
	}
	for _, ev := range all {
		sameAsDecoding(t, ev)
		sameAsDecoding(t, recordedEv[0], ev)
		sameAsDecoding(t, []byte(edgeEvents[9]), ev) // after a tool call
	}
	sameAsDecoding(t, recordedEv...)
}

// The recorded events and the plain edge events take the fast road.
func TestFastEventsTakeFastRoad(t *testing.T) {
	evs := recordedEvents(t)
	for _, ev := range edgeEvents[:20] {
		evs = append(evs, []byte(ev))
	}
	var r fastResponse
	for _, ev := range evs {
		if !r.read(ev) {
			t.Errorf("%s went to encoding/json", ev)
		}
	}
}

func FuzzFastEvent(f *testing.F) {
	for _, ev := range recordedEvents(f) {
		f.Add(ev)
	}
	for _, ev := range edgeEvents {
		f.Add([]byte(ev))
	}
	f.Fuzz(func(t *testing.T, ev []byte) {
		sameAsDecoding(t, ev)
		sameAsDecoding(t, []byte(edgeEvents[9]), ev)
	})
}

// A text chunk costs the SSE decoder's copy of the event and the output.
func TestStreamChunkAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; run without -race (BenchmarkStreamChunk* report the same)")
	}
	for _, bc := range benchEvents {
		c := newStream(t)
		ev := []byte(bc.event)
		c.ResponseBody(ev, false) //nolint:errcheck // warms the scratch buffers
		allocs := testing.AllocsPerRun(100, func() {
			if out, _ := c.ResponseBody(ev, false); len(out) == 0 {
				t.Fatal("no output")
			}
		})
		if allocs > 4 {
			t.Errorf("%s: %v allocations per chunk, want at most 4", bc.name, allocs)
		}
	}
}
