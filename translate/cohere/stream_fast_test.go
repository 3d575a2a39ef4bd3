package cohere

import (
	"bytes"
	"strings"
	"testing"

	"modelgate/translate/translatetest"
)

// The one-pass reading of stream events (event) must translate every
// event exactly as decoding it with encoding/json (decodedEvent) does:
// the same output and the same state after it.

// recordedEvents are the data of the events of the test streams.
func recordedEvents(t testing.TB) [][]byte {
	streams := [][]byte{[]byte(streamEvents)}
	for _, f := range []string{"testdata/chat/stream/provider.sse", "testdata/chat/stream-tool-calls/provider.sse"} {
		streams = append(streams, translatetest.ReadFile(t, f))
	}
	var events [][]byte
	for _, s := range streams {
		for _, line := range bytes.Split(s, []byte("\n")) {
			if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data: ")); ok {
				events = append(events, data)
			}
		}
	}
	if len(events) < 20 {
		t.Fatalf("%d events", len(events))
	}
	return events
}

// edgeEvents are events of unusual shapes, some for the fast road, most
// for encoding/json's.
var edgeEvents = []string{
	`{"type":"content-delta","index":0,"delta":{"message":{"content":{"text":"\u003cb\u003e \\ \/ \b\f\n\r\t \u0000 \u2028 \ud83d\ude00 \ud83d & é ` + "\u2029\xff" + `"}}}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"type":"text","text":""}}}}`,
	`{"type":"content-delta","delta":{"message":{"content":{}}}}`,
	`{"type":"content-delta","delta":{"message":{}}}`,
	`{"type":"content-delta"}`,
	`{"type":"content-delta","delta":{"message":{"content":null}}}`,
	`{"type":"content-delta","delta":{"message":{"content":[1]}}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":null}}}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"Text":"a"}}}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":"a","text":"b"}}}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":1,"x":2}}}}`,
	`{"type":"content-d\u0065lta","delta":{"message":{"content":{"text":"a"}}}}`,
	`{"type":"Content-Delta","delta":{"message":{"content":{"text":"a"}}}}`,
	`{"TYPE":"content-delta","delta":{"message":{"content":{"text":"a"}}}}`,
	`{"type":"content-delta","delta":{"Message":{"content":{"text":"a"}}}}`,
	`{"type":"content-delta","index":1.5,"delta":{"message":{"content":{"text":"a"}}}}`,
	`{"type":"content-delta","index":null,"delta":{"message":{"content":{"text":"a"}}}}`,
	`{"type":"content-delta","id":null,"delta":{"message":{"content":{"text":"a"}}}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":"a"}},"finish_reason":null}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":"a"}},"finish_reason":"x","error":""}}`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":"a"}}},"extra":[{"deep":{}}]}`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":"a"}}}} x`,
	`{"type":"content-delta","delta":{"message":{"content":{"text":"a"}}},}`,
	`{"type":"tool-call-start","index":0,"delta":{"message":{"tool_calls":{"id":"c\"1<","type":"function","function":{"name":"f&g","arguments":"{\"a\":\u00e9}"}}}}}`,
	`{"type":"tool-call-start","delta":{"message":{"tool_calls":{"function":{}}}}}`,
	`{"type":"tool-call-start","delta":{"message":{"tool_calls":{}}}}`,
	`{"type":"tool-call-start","delta":{"message":{}}}`,
	`{"type":"tool-call-start","delta":{"message":{"tool_calls":{"id":"","function":{"name":"","arguments":""}}}}}`,
	`{"type":"tool-call-delta","delta":{"message":{"tool_calls":{"function":{"arguments":"x","Arguments":"y"}}}}}`,
	`{"type":"tool-call-delta","delta":{"message":{"tool_calls":{"function":{"arguments":null}}}}}`,
	`{"type":"tool-call-delta","delta":{"message":{"tool_calls":[{"function":{"arguments":"x"}}]}}}`,
	`{"type":"tool-call-delta","delta":{"message":{"tool_calls":{"function":{"arguments":1}}}}}`,
	`{"type":"tool-call-delta","delta":{"message":{"tool_calls":{"id":1,"function":{"arguments":"x"}}}}}`,
	`{"type":"tool-call-delta","delta":{"message":{"tool_calls":{"function":{"arguments":"x","name":"n"}}}}}`,
	`{"type":"tool-call-end","index":0}`,
	`{"type":"tool-plan-delta","delta":{"message":{"tool_plan":"I"}}}`,
	`{"type":"citation-start","index":0,"delta":{"message":{"citations":{"start":1,"end":2,"text":"x","sources":[]}}}}`,
	`{"type":"message-start","id":"m\u00e9<1>","delta":{"message":{"role":"assistant"}}}`,
	`{"type":"message-end","delta":{"finish_reason":"MAX_TOKENS","usage":{"tokens":{"input_tokens":3,"output_tokens":4}}}}`,
	`{"type":"message-end","delta":{"error":"boom"}}`,
	`{"type":"unknown"}`,
	`{}`,
	`{"type":null}`,
	`{"type":"content-delta","delta":{"message":{"content":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}}`,
	`[]`,
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
		if !fast.done {
			got = fast.event(got, ev)
		}
		if !slow.done {
			want = slow.decodedEvent(want, ev)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("events %q\none pass: %s\ndecoded:  %s", events, got, want)
	}
	if fast.id != slow.id || fast.calls != slow.calls || fast.done != slow.done || fast.usage != slow.usage {
		t.Fatalf("events %q: state %q %d %v %+v, want %q %d %v %+v", events, fast.id, fast.calls, fast.done, fast.usage, slow.id, slow.calls, slow.done, slow.usage)
	}
}

func TestFastEventsMatchDecoding(t *testing.T) {
	recordedEv := recordedEvents(t)
	all := append([][]byte{}, recordedEv...)
	for _, ev := range edgeEvents {
		all = append(all, []byte(ev))
	}
	start := []byte(`{"id":"c1","type":"message-start","delta":{"message":{"role":"assistant"}}}`)
	for _, ev := range all {
		sameAsDecoding(t, ev)
		sameAsDecoding(t, start, ev)
		sameAsDecoding(t, start, []byte(edgeEvents[23]), ev, ev) // after a tool call started
	}
	sameAsDecoding(t, recordedEv...)
}

// The recorded content and tool call events take the fast road.
func TestFastEventsTakeFastRoad(t *testing.T) {
	var e fastEvent
	for _, ev := range recordedEvents(t) {
		if !bytes.Contains(ev, []byte(`"content-delta"`)) && !bytes.Contains(ev, []byte(`"tool-call-`)) {
			continue
		}
		if !e.read(ev) {
			t.Errorf("%s went to encoding/json", ev)
		}
		if raw := e.content; raw != nil {
			if _, ok := readContent(raw); !ok {
				t.Errorf("the content of %s went to encoding/json", ev)
			}
		}
		if raw := e.toolCalls; raw != nil {
			if _, _, _, ok := readToolCall(raw); !ok {
				t.Errorf("the tool call of %s went to encoding/json", ev)
			}
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
	start := []byte(`{"id":"c1","type":"message-start","delta":{"message":{"role":"assistant"}}}`)
	f.Fuzz(func(t *testing.T, ev []byte) {
		sameAsDecoding(t, ev)
		sameAsDecoding(t, start, ev)
	})
}

// A content or tool call chunk costs the SSE decoder's copies of the
// event and its type, and the output.
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
