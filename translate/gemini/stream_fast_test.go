package gemini

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate/api"
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

// The api helpers the fast road writes with agree with encoding/json.

var helperStrings = []string{"", "plain", `quote " backslash \ slash /`, "<tag>&amp;", "\b\f\n\r\t\x00\x01\x1f\x7f",
	"é ü 日本 \U0001F600", "\u2028\u2029", "\xff", "a\xc3(b", "\xed\xa0\x80", "\xef\xbf\xbd", "\xf0\x9f\x98"}

func TestAppendQuotedMatchesMarshal(t *testing.T) {
	for _, s := range helperStrings {
		checkQuoted(t, []byte(s))
	}
}

func checkQuoted(t *testing.T, s []byte) {
	want, _ := json.Marshal(string(s))
	if got := api.AppendQuoted(nil, s); !bytes.Equal(got, want) {
		t.Errorf("AppendQuoted(%q) = %s, want %s", s, got, want)
	}
	if got := api.AppendQuoted(nil, string(s)); !bytes.Equal(got, want) {
		t.Errorf("AppendQuoted(string %q) = %s, want %s", s, got, want)
	}
}

var helperTokens = []string{`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001F\u007f\u003C\u003e\u0026"`, `"\u00e9\u65E5"`,
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\u2028\u2029"`, "\"\u2028\xff<\"", `"\ufffd"`}

func TestAppendTokenBodyMatchesRoundTrip(t *testing.T) {
	for _, tok := range helperTokens {
		checkToken(t, []byte(tok))
	}
}

func checkToken(t *testing.T, tok []byte) {
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		t.Fatalf("%s: %v", tok, err)
	}
	want, _ := json.Marshal(s)
	got := append(api.AppendTokenBody([]byte{'"'}, tok), '"')
	if !bytes.Equal(got, want) {
		t.Errorf("AppendTokenBody(%s) = %s, want %s", tok, got, want)
	}
}

// The cursor accepts valid JSON only, and all of it but the deepest.
func checkCursor(t *testing.T, doc []byte) {
	cur := api.NewJSONCursor(doc)
	cur.Skip()
	got, want := cur.End(), json.Valid(doc)
	if got && !want {
		t.Fatalf("the cursor took %q, which is not JSON", doc)
	}
	if !got && want && bytes.Count(doc, []byte("["))+bytes.Count(doc, []byte("{")) <= 64 {
		t.Fatalf("the cursor refused %q, which is JSON", doc)
	}
	if want {
		cur := api.NewJSONCursor(doc)
		if v := cur.Skip(); cur.End() && !bytes.Equal(v, bytes.TrimSpace(doc)) {
			t.Fatalf("Skip returned %q of %q", v, doc)
		}
	}
}

func TestCursorMatchesValid(t *testing.T) {
	for _, ev := range edgeEvents {
		checkCursor(t, []byte(ev))
	}
	for _, ev := range recordedEvents(t) {
		checkCursor(t, ev)
	}
	for _, doc := range []string{`1`, `-0`, `0.5e+7`, `"x"`, `true`, `false`, `null`, `[]`, `{}`, ` [ 1 , { "a" : [ ] } ] `,
		`01`, `.5`, `1.`, `+1`, `-`, `1e`, `"\u12"`, `"\x"`, `'x'`, `[1 2]`, `{"a" 1}`, `{1:2}`, `[`, `]`, `{"a":1}}`, "\"\x1f\"", `nulls`, `truefalse`} {
		checkCursor(t, []byte(doc))
	}
}

func FuzzJSONHelpers(f *testing.F) {
	for _, s := range helperStrings {
		f.Add([]byte(s))
	}
	for _, s := range helperTokens {
		f.Add([]byte(s))
	}
	for _, s := range edgeEvents {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkQuoted(t, b)
		checkCursor(t, b)
		if cur := api.NewJSONCursor(b); cur.StringToken() != nil && cur.End() {
			checkToken(t, bytes.TrimSpace(b))
		}
	})
}
