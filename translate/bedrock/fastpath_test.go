package bedrock

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// fastPathPayloadsTaken are contentBlockDelta payloads the fast path
// takes: as Bedrock sends them, and in other well-formed shapes. Blocks 0
// and 1 are tools, 3 the JSON response tool.
var fastPathPayloadsTaken = []string{
	`{"contentBlockIndex":0,"delta":{"text":"The"},"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345"}`,
	`{"contentBlockIndex":0,"delta":{"text":""}}`,
	`{"delta":{"text":"no index"}}`,
	` { "p" : "x" , "delta" : { "text" : "a" } , "contentBlockIndex" : 12 } ` + "\n",
	`{"contentBlockIndex":0,"delta":{"text":"line\nbreak \"quoted\" back\\slash \/ \b\f\r\t <b>&amp; \u003c\u0000\u001f\u007f"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"héllo 世界 😀 \u00e9\ud83d\ude00 \u2028 ` + "\u2028\u2029\ufffd" + ` \ud800 \udc00x \ud800\ud800\udc00"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"bad utf8 ` + "\xff\xc3\xed\xa0\x80" + `"}}`,
	`{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Let me <think>\n"}}}`,
	`{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":""}}}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\": \"Par"}}}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":{"input":""}}}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":{}}}`,
	`{"contentBlockIndex":2,"delta":{"toolUse":{"input":"x"}}}`,
	`{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{\"a\":"}}}`,
	`{"contentBlockIndex":3,"delta":{"toolUse":{"input":""}}}`,
	`{"contentBlockIndex":0,"delta":{"text":"t","toolUse":{"input":"x"},"reasoningContent":{"text":"r"}}}`,
	`{"contentBlockIndex":0,"delta":{"toolUse":{"input":"x"},"reasoningContent":{"text":"r"}}}`,
	`{"contentBlockIndex":0,"delta":{}}`,
	`{"contentBlockIndex":0,"delta":{"image":{"format":"png"}}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},"extra":[1,2.5e3,true,false,null,{"x":"y"}]}`,
}

// fastPathPayloadsLeft are payloads the fast path leaves to the full
// decoding: not JSON, or not as streamEvent reads them.
var fastPathPayloadsLeft = []string{
	// Signatures and redacted reasoning are kept with their block (blockDelta).
	`{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqQBCgIYAhIM"}}}`,
	`{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"aGk="}}}`,
	`{"contentBlockIndex":0,"delta":{"reasoningContent":{}}}`,
	`{"contentBlockIndex":0,"delta":{"text":"raw` + "\n" + `newline"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"bad \x"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"bad \u12"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"\"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"}}x`,
	`{"contentBlockIndex":0,"delta":{"text":"a"}}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"]}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},}`,
	`{"contentBlockIndex":0 "delta":{"text":"a"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},"p":"` + "\t" + `"}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},"p":tru}`,
	`{"contentBlockIndex":0,"delta":{"text":null}}`,
	`{"contentBlockIndex":0,"delta":{"text":1}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a","text":"b"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a","Text":"b"}}`,
	`{"contentBlockIndex":0,"delta":{"TEXT":"a"}}`,
	`{"contentBlockIndex":0,"delta":{"\u0074ext":"a"}}`,
	`{"contentBlockIndex":0,"Delta":{"toolUse":{"input":"x"}},"delta":{"text":"a"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},"delta":{"toolUse":{"input":"x"}}}`,
	`{"contentBlockIndex":0,"contentBlockIndex":1,"delta":{"text":"a"}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},"stopReason":"end_turn"}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},"usage":{"inputTokens":1}}`,
	`{"contentBlockIndex":0,"delta":{"text":"a"},"Message":"x"}`,
	`{"contentBlockIndex":01,"delta":{"text":"a"}}`,
	`{"contentBlockIndex":-1,"delta":{"text":"a"}}`,
	`{"contentBlockIndex":1.0,"delta":{"text":"a"}}`,
	`{"contentBlockIndex":99999999999999999999,"delta":{"text":"a"}}`,
	`{"contentBlockIndex":"0","delta":{"text":"a"}}`,
	`{"contentBlockIndex":null,"delta":{"text":"a"}}`,
	`{"contentBlockIndex":0,"delta":null}`,
	`{"contentBlockIndex":0,"delta":"x"}`,
	`{"contentBlockIndex":0}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":null}}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":{"input":{}}}}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":{"input":"a","input":"b"}}}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":{"Input":"a"}}}`,
	`{"contentBlockIndex":1,"delta":{"toolUse":{"input":"a","x":[}}}`,
	`{"contentBlockIndex":0,"delta":{"reasoningContent":null}}`,
	`{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":[]}}}`,
	`{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"a"},"reasoningContent":{"text":"b"}}}`,
	`null`, `[]`, `1`, `"x"`, ``, `{`, `}`, `{}`,
}

// fastPathPayloads are all of them: each must come out as decodedFrame
// writes it.
var fastPathPayloads = append(append([]string(nil), fastPathPayloadsTaken...), fastPathPayloadsLeft...)

// fastPathChat is a stream past messageStart, of a model that needs
// escaping, and the starts of two tool blocks and of the JSON response
// tool's.
func fastPathChat(t testing.TB) *chat {
	c := newChat(t, streamReq)
	c.target.Model = "model<&>\u2028é\xff"
	c.jsonMode = true
	c.ResponseHeaders(200, "application/vnd.amazon.eventstream")
	up := eventFrame("messageStart", `{"role":"assistant"}`)
	up = append(up, eventFrame("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t0","name":"f"}}}`)...)
	up = append(up, eventFrame("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t1","name":"g"}}}`)...)
	up = append(up, eventFrame("contentBlockStart", `{"contentBlockIndex":3,"start":{"toolUse":{"toolUseId":"t3","name":"json_response"}}}`)...)
	c.ResponseBody(up, false)
	if c.done || len(c.tools) != 2 || c.jsonBlock != 4 {
		t.Fatalf("setup: tools %v, JSON block %d", c.tools, c.jsonBlock)
	}
	return c
}

// checkFastPath compares frame, with its fast path, with decodedFrame.
func checkFastPath(t *testing.T, payload []byte) {
	t.Helper()
	f, err := checkFrame(eventFrame("contentBlockDelta", string(payload)))
	if err != nil {
		t.Fatal(err)
	}
	fast, full := fastPathChat(t), fastPathChat(t)
	got := fast.frame([]byte("before\n"), f)
	want := full.decodedFrame([]byte("before\n"), f)
	if !bytes.Equal(got, want) || fast.done != full.done {
		t.Errorf("payload %q\n got %q (done %v)\nwant %q (done %v)", payload, got, fast.done, want, full.done)
	}
}

func TestFastPathMatchesDecoding(t *testing.T) {
	for _, p := range fastPathPayloads {
		checkFastPath(t, []byte(p))
	}
}

// The fast path takes the deltas it should (rather than leaving them all
// to the full decoding, which would pass the test above too), and no
// others.
func TestFastPathTakesDeltas(t *testing.T) {
	c := fastPathChat(t)
	for _, p := range fastPathPayloadsTaken {
		if _, ok := c.fastDelta(nil, []byte(p)); !ok {
			t.Errorf("not taken: %s", p)
		}
	}
	for _, p := range fastPathPayloadsLeft {
		if _, ok := c.fastDelta(nil, []byte(p)); ok {
			t.Errorf("taken: %s", p)
		}
	}
}

func FuzzFastPath(f *testing.F) {
	for _, p := range fastPathPayloads {
		f.Add([]byte(p))
	}
	f.Fuzz(checkFastPath)
}

// each, whatever the cuts, hands on the frames and the error that Feed
// returns for the whole stream.
func FuzzEachMatchesFeed(f *testing.F) {
	ok := append(eventFrame("messageStart", `{"role":"assistant"}`), eventFrame("contentBlockDelta", `{"delta":{"text":"hi"}}`)...)
	f.Add(ok, uint64(1))
	f.Add(ok[:len(ok)-3], uint64(2))
	corrupt := bytes.Clone(ok)
	corrupt[len(corrupt)-10] ^= 1
	f.Add(corrupt, uint64(3))
	f.Add(append(bytes.Clone(ok), encodedFrame([]byte("\x01x\x2a"), nil)...), uint64(4)) // a header of unknown type
	f.Add(append(bytes.Clone(ok), encodedFrame([]byte("\x05x"), nil)...), uint64(5))     // a cut header name
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64) {
		var whole Decoder
		msgs, wantErr := whole.Feed(stream)
		var want [][]byte
		for _, m := range msgs {
			want = append(want, append([]byte(m.Header(":event-type")+"|"), m.Payload...))
		}
		var d Decoder
		var got [][]byte
		var err error
		r := rand.New(rand.NewPCG(seed, seed))
		for rest := stream; len(rest) > 0 && err == nil; {
			n := 1 + r.IntN(min(len(rest), 64))
			err = d.each(rest[:n], func(f rawFrame) {
				got = append(got, append([]byte(string(f.header(":event-type"))+"|"), f.payload...))
			})
			rest = rest[n:]
		}
		if (err == nil) != (wantErr == nil) || len(got) != len(want) || d.Pending() != whole.Pending() && err == nil {
			t.Fatalf("each: %d frames, err %v, pending %v; Feed: %d frames, err %v, pending %v", len(got), err, d.Pending(), len(want), wantErr, whole.Pending())
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// Any text in a delta, escaped or not, valid or not, comes out as the
// full decoding writes it.
func FuzzFastPathText(f *testing.F) {
	for _, text := range []string{"plain", `\n\"\\\/\b\f\r\t`, `\u003c\u2028\ud83d\ude00\ud800`, "<&>\u2028\xff\xed\xa0\x80", `\`, "\x00"} {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		checkFastPath(t, append(append([]byte(`{"contentBlockIndex":0,"delta":{"text":"`), text...), `"}}`...))
	})
}

// encodedFrame encodes a frame of the headers h, encoded or not.
func encodedFrame(h, payload []byte) []byte {
	total := preludeLen + len(h) + len(payload) + 4
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(append(b, h...), payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// A delta frame costs one allocation: the output's.
func TestStreamDeltaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := fastPathChat(t)
	f := eventFrame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"The"},"p":"abcdefghijklmnopqrstuvwxyz"}`)
	if n := testing.AllocsPerRun(100, func() { c.ResponseBody(f, false) }); n > 1 {
		t.Errorf("%v allocations per delta", n)
	}
}

// One contentBlockDelta frame of each kind through a stream, as Bedrock
// sends them (padded), the text delta like BenchmarkStreamFrame's.
func BenchmarkStreamFrameDeltas(b *testing.B) {
	for _, bc := range []struct{ name, payload string }{
		{"text", `{"contentBlockIndex":2,"delta":{"text":" capital of France is Paris."},"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJK"}`},
		{"text-escaped", `{"contentBlockIndex":2,"delta":{"text":"\n\n## Step 2: \"Split\" the <input>\n"},"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJK"}`},
		{"reasoning", `{"contentBlockIndex":2,"delta":{"reasoningContent":{"text":" user has"}},"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01"}`},
		{"tool-arguments", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"location\": \"San Fra"}},"p":"abcdefghijklmnopqrstuvw"}`},
		// The text delta with its index repeated, which the fast path
		// leaves to the decoded road: what the fast path saves.
		{"text-decoded", `{"contentBlockIndex":2,"contentBlockIndex":2,"delta":{"text":" capital of France is Paris."},"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJK"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := fastPathChat(b)
			f := eventFrame("contentBlockDelta", bc.payload)
			b.ReportAllocs()
			for b.Loop() {
				if out, _ := c.ResponseBody(f, false); len(out) == 0 {
					b.Fatal("no output")
				}
			}
		})
	}
}
