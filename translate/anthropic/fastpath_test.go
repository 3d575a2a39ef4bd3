package anthropic

import (
	"bytes"
	"testing"
)

// fastPathEventsTaken are events the fast path takes: content_block_delta
// events as Anthropic sends them, and in other well-formed shapes. Blocks
// 0 and 1 are tools, 3 the JSON response tool.
var fastPathEventsTaken = []string{
	`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" crossing"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}`,
	`{"delta":{"text":"a","type":"text_delta"},"index":0,"type":"content_block_delta"}`,
	` { "type" : "content_block_delta" , "index" : 7 , "delta" : { "type" : "text_delta" , "text" : "a" } } ` + "\n\t\r",
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"line\nbreak \"quoted\" back\\slash \/ \b\f\r\t"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"<b>&amp;</b> \u003c\u003e\u0026 \u0000\u001f\u007f"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"héllo 世界 😀 \u00e9\u4e16\ud83d\ude00 \u2028\u2029 ` + "\u2028\u2029\ufffd" + `"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lone \ud800 \udc00 \ud800\u0041 \ud800\ud800\udc00 \ud83d"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad utf8 ` + "\xff\xfe\xed\xa0\x80\xc3" + ` end"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\uD83D\uDE00 \uD83D\uDe00 \uDE00\uD83D"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","stop_reason":"x","stop_reason":"y"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","extra":{"x":[1,2.5e3,true,false,null,"s"]},"n":-0.5}}`,
	`{"type":"content_block_delta","index":0,"extra":[1,2],"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","delta":{"type":"text_delta","text":"no index"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"unknown_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"x","cited_text":"y"}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think <about> it\n"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"\u0000"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","text":"t","thinking":"a"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta"}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
	`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
	`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":""}}`,
}

// fastPathEventsLeft are events the fast path leaves to the full decoding:
// not JSON, not as eventIn reads them, or other events.
var fastPathEventsLeft = []string{
	// A signature is kept with its thinking block (decodedEvent).
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\UD83D"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"raw` + "\n" + `newline"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \x escape"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \u12 escape"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\'"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}x`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"]}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},}`,
	`{"type":"content_block_delta" "index":0,"delta":{"type":"text_delta","text":"a"}}`,
	`{,"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a" "x":1}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":1}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":null,"text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text\u005fdelta","text":"a"}}`,
	`{"type":"content_block\u005fdelta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"Type":"text_delta","TEXT":"a"}}`,
	`{"TYPE":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","Delta":{"type":"thinking_delta","thinking":"b"},"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"delta":{"type":"thinking_delta","thinking":"b"}}`,
	`{"type":"content_block_delta","type":"ping","index":0,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","stop_reason":null}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","extra":{"x":[1,}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","extra":01}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","\u0074ext":"b"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","ſtop_reason":"b"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","x":"` + "\n" + `"}}`,
	`{"type":"content_block_delta","index":0,"usage":null,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"message":{},"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":1e0,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":99999999999999999999,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":null,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0}`,
	`{"type":"content_block_delta","index":0,"delta":null}`,
	`{"type":"content_block_delta","index":0,"delta":[]}`,
	`{"type":"content_block_delta","index":0,"delta":{}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"bad \q"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":{}}}`,
	`{"type":"ping"}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
	`null`, `[]`, `1`, `"x"`, ``, `{`, `}`, `{}`,
}

// fastPathEvents are all of them: each must come out as decodedEvent
// writes it.
var fastPathEvents = append(append([]string(nil), fastPathEventsTaken...), fastPathEventsLeft...)

// fastPathChat is a stream past message_start (with an id and a model
// that need escaping) and the starts of two tool blocks and of the JSON
// response tool's.
func fastPathChat(t testing.TB) *chat {
	c := newChat(t, streamReq)
	c.ResponseHeaders(200, "text/event-stream")
	c.jsonMode = true
	c.ResponseBody([]byte(`data: {"type":"message_start","message":{"id":"msg_<1>&\u2028","model":"claude-é","usage":{"input_tokens":10}}}`+"\n\n"+
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t0","name":"f"}}`+"\n\n"+
		`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"g"}}`+"\n\n"+
		`data: {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t3","name":"json_response"}}`+"\n\n"), false)
	if c.st.done || len(c.st.tools) != 2 || c.st.jsonBlock != 4 {
		t.Fatalf("setup: %+v", c.st)
	}
	return c
}

// checkFastPath compares event, with its fast path, with decodedEvent.
func checkFastPath(t *testing.T, data []byte) {
	t.Helper()
	fast, full := fastPathChat(t), fastPathChat(t)
	got := fast.event([]byte("before\n"), data)
	want := full.decodedEvent([]byte("before\n"), data)
	if !bytes.Equal(got, want) || fast.st.done != full.st.done {
		t.Errorf("event %q\n got %q (done %v)\nwant %q (done %v)", data, got, fast.st.done, want, full.st.done)
	}
}

func TestFastPathMatchesDecoding(t *testing.T) {
	for _, ev := range fastPathEvents {
		checkFastPath(t, []byte(ev))
	}
}

// The fast path takes the deltas it should (rather than leaving them all
// to the full decoding, which would pass the test above too), and no
// others.
func TestFastPathTakesDeltas(t *testing.T) {
	c := fastPathChat(t)
	for _, ev := range fastPathEventsTaken {
		if _, ok := c.fastDelta(nil, []byte(ev)); !ok {
			t.Errorf("not taken: %s", ev)
		}
	}
	for _, ev := range fastPathEventsLeft {
		if _, ok := c.fastDelta(nil, []byte(ev)); ok {
			t.Errorf("taken: %s", ev)
		}
	}
}

func FuzzFastPath(f *testing.F) {
	for _, ev := range fastPathEvents {
		f.Add([]byte(ev))
	}
	f.Fuzz(checkFastPath)
}

// Any text in a delta, escaped or not, valid or not, comes out as the
// full decoding writes it.
func FuzzFastPathText(f *testing.F) {
	for _, text := range []string{"plain", `\n\"\\\/\b\f\r\t`, `\u003c\u2028\ud83d\ude00\ud800`, "<&>\u2028\xff\xed\xa0\x80", `\`, "\x00"} {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		checkFastPath(t, append(append([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`), text...), `"}}`...))
	})
}

// A text delta costs the SSE decoder's two allocations (the event's type
// and data) and the output's one.
func TestStreamDeltaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := fastPathChat(t)
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\" crossing\"}}\n\n")
	if n := testing.AllocsPerRun(100, func() { c.ResponseBody(ev, false) }); n > 3 {
		t.Errorf("%v allocations per delta", n)
	}
}

// One content_block_delta event of each kind through a stream, the text
// delta as BenchmarkStreamChunk sends it.
func BenchmarkStreamChunkDeltas(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"text", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":" crossing"}}`},
		{"text-escaped", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"\n\n## Step 2: \"Split\" the <input>\n"}}`},
		{"thinking", `{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":" is a straightforward question about"}       }`},
		{"tool-arguments", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}`},
		// The text delta with its index repeated, which the fast path
		// leaves to the decoded road: what the fast path saves.
		{"text-decoded", `{"type":"content_block_delta","index":2,"index":2,"delta":{"type":"text_delta","text":" crossing"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := fastPathChat(b)
			ev := []byte("event: content_block_delta\ndata: " + bc.data + "\n\n")
			b.ReportAllocs()
			for b.Loop() {
				if out, _ := c.ResponseBody(ev, false); len(out) == 0 {
					b.Fatal("no output")
				}
			}
		})
	}
}
