package translate

import (
	"bytes"
	"encoding/json"
	"testing"
)

// These were the tests of the ext_proc server's own scans of the client's
// bytes (extproc's generatedText and its span's finish reasons), which
// the translators' reports replace: they hold Scan to the same counts.

// Scan counts the text of generated members only (escapes as the bytes
// they take), once each, also when the text holds what looks like a
// member, and whatever the JSON's spacing.
func TestScanCountsGeneratedText(t *testing.T) {
	for _, tt := range []struct {
		out    string
		d      Dialect
		stream bool
		want   int
	}{
		{`data: {"id":"chatcmpl-1","model":"m","choices":[{"delta":{"content":"Hello"}}]}`, Chat, true, 5},
		{`data: {"id": "chatcmpl-1", "model": "m", "choices": [{"delta": {"content" : "Hello"}}]}`, Chat, true, 5},
		{"data: {\"choices\":\t[{\"delta\":\n{\"content\":\r\n \"Hi\"}}]}", Chat, true, 2},
		{`data: {"choices":[{"delta":{"content":"a\":\"b","role":"assistant"}}]}`, Chat, true, 7},
		{`data: {"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{\"x\""}}]}}]}`, Chat, true, 6},
		{`data: {"choices":[{"delta":{"content":null,"refusal":"no"}}]}`, Chat, true, 2},
		{`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","delta":"hi"}`, Responses, true, 2},
		// The done events repeat the deltas.
		{`data: {"type":"response.output_text.done","text":"hi"}`, Responses, true, 0},
		{`data: {"type":"response.output_item.done","item":{"type":"function_call","arguments":"{}"}}`, Responses, true, 0},
		{`{"object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"Paris."}]}]}`, Responses, false, 6},
		{`{"object": "chat.completion", "choices": [{"message": {"role": "assistant", "content": "Paris."}}]}`, Chat, false, 6},
		{`data: {"usage":{"prompt_tokens":1}}`, Chat, true, 0},
		{`data: {"choices":[{"delta":{"content":"unterminated`, Chat, true, 12},
	} {
		var o Output
		if o.Scan(tt.d, []byte(tt.out), 200, tt.stream); o.TextBytes() != tt.want {
			t.Errorf("Scan(%s) counts %d, want %d", tt.out, o.TextBytes(), tt.want)
		}
	}
}

// Scan reads any bytes without failing, never counts more than it was
// given, reports spans within them, and counts a delta's content
// exactly, escapes included, whatever the text holds and however the
// chunk is spaced.
func FuzzScanText(f *testing.F) {
	for _, s := range []string{"Hello", `a":"b`, "\n\t\"\\", "{\"content\":\"x\"}", "\u2028é\xff", ""} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, spaced bool) {
		var o Output
		for _, d := range []Dialect{Chat, Responses, Messages} {
			for _, stream := range []bool{false, true} {
				o.Scan(d, []byte(s), 200, stream)
				if n := o.TextBytes(); n < 0 || n > len(s) {
					t.Fatalf("Scan(%q) counts %d", s, n)
				}
				for _, x := range o.Texts {
					if x.Start < 0 || x.Start > x.End || x.End > len(s) {
						t.Fatalf("Scan(%q) reports %+v", s, x)
					}
				}
			}
		}
		v, _ := json.Marshal(s)
		chunk := `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":` + string(v) + `}}]}`
		if spaced {
			chunk = `data: {"choices" : [ {"index" : 0, "delta" :` + "\n\t" + `{"role" : "assistant", "content" :  ` + string(v) + `} } ]}`
		}
		if o.Scan(Chat, []byte(chunk), 200, true); o.TextBytes() != len(v)-2 {
			t.Fatalf("Scan(%s) counts %d, want %d", chunk, o.TextBytes(), len(v)-2)
		}
	})
}

func TestScanFinishReasons(t *testing.T) {
	var o Output
	o.Scan(Chat, []byte(`{"choices":[{"finish_reason": "stop"},{"finish_reason":null},{"finish_reason" :"length"}]}`+
		`data: {"choices":[{"delta":{},"finish_reason":"stop"}]}`+"\n\n"+`{"finish_reason":"tool_calls`), 200, false)
	if len(o.FinishReasons) != 2 || o.FinishReasons[0] != "stop" || o.FinishReasons[1] != "length" {
		t.Errorf("finish reasons = %q", o.FinishReasons)
	}
}

// Any answer bytes, no panic, and every reason kept is a string the bytes
// hold.
func FuzzScanFinishReasons(f *testing.F) {
	f.Add([]byte(`{"finish_reason":"stop"}`))
	f.Add([]byte(`"finish_reason" : "length" "finish_reason":`))
	f.Add([]byte(`"finish_reason":"`))
	f.Add([]byte(`{"type":"message","stop_reason":"end_turn"}`))
	f.Add([]byte(`{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		var o Output
		for _, d := range []Dialect{Chat, Responses, Messages} {
			for _, stream := range []bool{false, true} {
				o.Scan(d, out, 200, stream)
				for _, r := range o.FinishReasons {
					if !bytes.Contains(out, []byte(`"`+r+`"`)) {
						t.Fatalf("reason %q is not in %q", r, out)
					}
				}
			}
		}
	})
}
