package responses

import (
	"bytes"
	"encoding/json"
	"testing"

	"modelgate/translate"
)

// The fast paths must read and write what encoding/json would: these
// tests hold them to it on the seeds, and fuzzing holds them to it on
// anything.

// plainChunkSeeds are chat chunks, most of which plainChunk takes.
var plainChunkSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]}`,
	`{"choices":[{"delta":{"content":"<b>\"Tom\" & Jerry</b>\n\u2028\ud83d\ude00 caf\u00e9"}}],"system_fingerprint":"fp","usage":null}`,
	`{"choices":[{"delta":{"reasoning_content":"Let me think.\n"}}],"model":"m2"}`,
	`{"choices":[{"delta":{"reasoning_content":"hmm","content":"ok"},"finish_reason":"length"},{"index":1,"delta":{"content":"two"}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Par"}},{"index":1,"id":"call_2","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[null,{"function":null},{"index":null,"function":{"arguments":"x"}}]}}]}`,
	`{"choices":[null,{"delta":null,"finish_reason":"tool_calls"}],"error":null}`,
	"{\"choices\":[{\"delta\":{\"content\":\"bad\xffbyte \\ud800\"}}]}",
	`{"choices":null}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	`{"error":{"message":"overloaded","type":"server_error"}}`,
	`{"Choices":[{"delta":{"content":"folded"}}]}`,
	`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
	`{"choices":[{"delta":{"cont\u0065nt":"escaped key"}}]}`,
	`{"choices":[{"index":1.5,"delta":{"content":"x"}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":99999999999999999999}]}}]}`,
	`{"created":"1","choices":[]}`,
	`{"choices":[{"delta":{"content":["parts"]}}]}`,
	`{"choices":[{"delta":{"role":"assistant","content":"","refusal":null}}]}`,
	`{"choices":[{"delta":{"refusal":"I cannot help with that."}}]}`,
	`[1]`,
	`null`,
	`{"choices":[{"delta":{"content":"unterminated"}}]`,
}

// Whatever plainChunk takes, it turns into the events and state that
// decoding the chunk would, after any chunk before it; what it leaves, it
// leaves untouched.
func FuzzPlainChunk(f *testing.F) {
	for _, s := range plainChunkSeeds {
		f.Add([]byte(s), []byte(plainChunkSeeds[5]))
	}
	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	f.Fuzz(func(t *testing.T, data, before []byte) {
		plain, decoded := NewStream(r, "resp_f", 1), NewStream(r, "resp_f", 1)
		for _, s := range []*Stream{plain, decoded} {
			s.chatEvent(before)
			s.out = s.out[:0]
		}
		if plain.done {
			return
		}
		seq := plain.seq
		if !plain.plainChunk(data) {
			if len(plain.out) != 0 || plain.seq != seq {
				t.Fatalf("plainChunk left %s but wrote %q", data, plain.out)
			}
			return
		}
		decoded.decodedChunk(data)
		if !bytes.Equal(plain.out, decoded.out) {
			t.Fatalf("chunk %s\nplain   %q\ndecoded %q", data, plain.out, decoded.out)
		}
		plain.out, decoded.out = plain.out[:0], decoded.out[:0]
		plain.complete()
		decoded.complete()
		if !bytes.Equal(plain.out, decoded.out) {
			t.Fatalf("chunk %s, at the end\nplain   %q\ndecoded %q", data, plain.out, decoded.out)
		}
	})
}

// The seeds the fast path must take, lest it quietly stop being one.
func TestPlainChunkTakesTheUsualChunks(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	for _, s := range plainChunkSeeds[:11] {
		if !NewStream(r, "resp_f", 1).plainChunk([]byte(s)) {
			t.Errorf("plainChunk left %s", s)
		}
	}
}

// plainDeltaHead reads what decoding a deltaHead would, or leaves it.
func FuzzPlainDeltaHead(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" capital","logprobs":[]}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":12,"item_id":"fc_1","output_index":1,"delta":"{\"a\""}`,
		`{"type":"response.output_text.delta","sequence_number":4,"logprobs":null}`,
		`{"type":"response.\u006futput_text.delta","sequence_number":-0}`,
		`{"TYPE":"x.delta","sequence_number":1}`,
		`{"type":"x.delta","sequence_number":1,"sequence_number":2}`,
		`{"type":"x.delta","sequence_number":1e3}`,
		`{"type":"x.delta","sequence_number":99999999999999999999}`,
		"{\"type\":\"bad\xff.delta\",\"sequence_number\":0}",
		`{"type":null,"sequence_number":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var scratch []byte
		typ, seq, logprobs, ok := plainDeltaHead(data, &scratch)
		if !ok {
			return
		}
		var h deltaHead
		if err := json.Unmarshal(data, &h); err != nil || h.Seq == nil {
			t.Fatalf("plainDeltaHead took %s, which does not decode: %v", data, err)
		}
		if string(typ) != h.Type || seq != *h.Seq || logprobs != (h.Logprobs != nil) {
			t.Fatalf("%s: plainDeltaHead %q %d %v, decoded %q %d %v", data, typ, seq, logprobs, h.Type, *h.Seq, h.Logprobs != nil)
		}
	})
}

// The bulk of a stream, its delta events, costs a couple of allocations
// per event: the SSE decoder's and the returned bytes.
func TestDeltaAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	s := NewStream(r, "resp_a", 1)
	s.Feed([]byte("data: "+plainChunkSeeds[0]+"\n\ndata: "+plainChunkSeeds[5]+"\n\n"), false)
	for _, chunk := range []string{plainChunkSeeds[1], plainChunkSeeds[2], plainChunkSeeds[3],
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Par"}}]}}]}`} {
		event := []byte("data: " + chunk + "\n\n")
		if n := testing.AllocsPerRun(100, func() { s.Feed(event, false) }); n > 3 {
			t.Errorf("%.0f allocations for %s", n, chunk)
		}
	}

	p := NewPassthrough(translate.Target{Model: "m"}, r, nil, "resp_a")
	p.ResponseHeaders(200, "text/event-stream")
	event := []byte("event: response.output_text.delta\ndata: " +
		`{"type":"response.output_text.delta","sequence_number":0,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" capital","logprobs":[]}` + "\n\n")
	if n := testing.AllocsPerRun(100, func() {
		p.seq = 0
		p.ResponseBody(event, false) //nolint:errcheck // a stream has no error
	}); n > 4 {
		t.Errorf("%.0f allocations for a relayed delta", n)
	}
}
