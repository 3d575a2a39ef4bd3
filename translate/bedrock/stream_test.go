package bedrock

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"modelgate/translate/translatetest"
)

// frame encodes an event-stream frame with string headers.
func frame(payload []byte, headers ...string) []byte {
	var h []byte
	for i := 0; i+1 < len(headers); i += 2 {
		h = append(h, byte(len(headers[i])))
		h = append(h, headers[i]...)
		h = append(h, 7)
		h = binary.BigEndian.AppendUint16(h, uint16(len(headers[i+1])))
		h = append(h, headers[i+1]...)
	}
	total := preludeLen + len(h) + len(payload) + 4
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(append(b, h...), payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func eventFrame(typ, payload string) []byte {
	return frame([]byte(payload), ":message-type", "event", ":event-type", typ)
}

// Payloads of the wrong shape end the stream cleanly, never with a panic.
func TestStreamHostileFrames(t *testing.T) {
	for _, tt := range []struct{ typ, payload string }{
		{"messageStart", `null`},
		{"messageStart", `[]`},
		{"contentBlockStart", `{"start":null}`},
		{"contentBlockStart", `{"start":{"toolUse":null}}`},
		{"contentBlockStart", `{"start":{"toolUse":"x"}}`},
		{"contentBlockStart", `{"contentBlockIndex":"0","start":{"toolUse":{"name":"f"}}}`},
		{"contentBlockDelta", `{"delta":null}`},
		{"contentBlockDelta", `{"delta":{"text":null}}`},
		{"contentBlockDelta", `{"delta":{"text":1}}`},
		{"contentBlockDelta", `{"delta":{"toolUse":null}}`},
		{"contentBlockDelta", `{"contentBlockIndex":5,"delta":{"toolUse":{"input":"x"}}}`},
		{"contentBlockDelta", `{"delta":{"toolUse":{"input":{}}}}`},
		{"contentBlockDelta", `{"delta":{"reasoningContent":null}}`},
		{"contentBlockDelta", `{"delta":{"reasoningContent":{"text":[]}}}`},
		{"messageStop", `{"stopReason":null}`},
		{"messageStop", `{"stopReason":1}`},
		{"metadata", `{"usage":null}`},
		{"metadata", `{"usage":"x"}`},
		{"metadata", `{"usage":{"inputTokens":"1"}}`},
	} {
		t.Run(tt.typ+" "+tt.payload, func(t *testing.T) {
			up := append(eventFrame("messageStart", `{"role":"assistant"}`), eventFrame(tt.typ, tt.payload)...)
			up = append(up, eventFrame("messageStop", `{"stopReason":"end_turn"}`)...)
			out, _ := runStream(t, [][]byte{up})
			translatetest.CheckStreamEnd(t, out)
		})
	}
	exception := frame([]byte(`{"message":1}`), ":message-type", "exception", ":exception-type", "throttlingException")
	out, _ := runStream(t, [][]byte{exception})
	translatetest.CheckStreamEnd(t, out)
}

// Whatever JSON a provider puts in well-formed frames, cut anywhere, the
// stream ends cleanly with the same output for any split.
func FuzzStreamFrames(f *testing.F) {
	f.Add("contentBlockDelta", []byte(`{"delta":{"text":"hi"}}`), "messageStop", []byte(`{"stopReason":"end_turn"}`), uint64(1))
	f.Add("contentBlockStart", []byte(`{"start":{"toolUse":{"toolUseId":"t","name":"f"}}}`), "contentBlockDelta", []byte(`{"delta":{"toolUse":{"input":"{}"}}}`), uint64(2))
	f.Add("metadata", []byte(`{"usage":{"inputTokens":1}}`), "exception", []byte(`{"message":"x"}`), uint64(3))
	f.Fuzz(func(t *testing.T, typ1 string, p1 []byte, typ2 string, p2 []byte, seed uint64) {
		if len(typ1) > 255 || len(typ2) > 255 {
			return
		}
		up := eventFrame("messageStart", `{"role":"assistant"}`)
		for _, ev := range []struct {
			typ string
			p   []byte
		}{{typ1, p1}, {typ2, p2}} {
			if ev.typ == "exception" {
				up = append(up, frame(ev.p, ":message-type", "exception", ":exception-type", "modelStreamErrorException")...)
				continue
			}
			up = append(up, frame(ev.p, ":message-type", "event", ":event-type", ev.typ)...)
		}
		whole, _ := runStream(t, [][]byte{up})
		r := rand.New(rand.NewPCG(seed, seed))
		var chunks [][]byte
		for rest := up; len(rest) > 0; {
			n := 1 + r.IntN(min(len(rest), 64))
			chunks, rest = append(chunks, rest[:n]), rest[n:]
		}
		if got, _ := runStream(t, chunks); string(got) != string(whole) {
			t.Fatalf("split output differs\nwhole %q\nsplit %q", whole, got)
		}
		events := strings.Split(strings.TrimSpace(string(whole)), "\n\n")
		for i, ev := range events {
			if i < len(events)-1 && (ev == "data: [DONE]" || strings.HasPrefix(ev, `data: {"error":`)) {
				t.Fatalf("event %d of %d ends the stream: %s", i, len(events), whole)
			}
		}
	})
}
