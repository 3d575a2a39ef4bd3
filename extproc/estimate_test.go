package extproc

import (
	"encoding/json"
	"testing"

	"modelgate/translate"
)

// maxOutputTokens reads a member as encoding/json would, for any valid
// JSON value.
func FuzzMaxOutputTokens(f *testing.F) {
	for _, s := range []string{`100`, ` 7 `, `0`, `-3`, `1.0`, `1e3`, `null`, `"5"`, `9223372036854775807`, `9223372036854775808`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		var want int64
		if json.Unmarshal(raw, &want) != nil || want < 0 {
			want = 0
		}
		if got := maxOutputTokens(map[string]json.RawMessage{"max_tokens": raw}); got != want {
			t.Fatalf("maxOutputTokens(%s) = %d, want %d", raw, got, want)
		}
	})
}

// usageTranslator is a translator that only reports usage.
type usageTranslator struct {
	translate.Translator
	u translate.Usage
}

func (t usageTranslator) Usage() translate.Usage { return t.u }

// An exchange that broke off is charged an estimate of its tokens, and
// the audio seconds, images and web searches the provider reported stand
// in it.
func TestEstimateKeepsAudioAndImages(t *testing.T) {
	for _, tt := range []struct {
		endpoint endpoint
		u        translate.Usage
	}{
		{endpointTranscriptions, translate.Usage{AudioSeconds: 7.5}},
		{endpointImages, translate.Usage{Images: 2}},
		{endpointMessages, translate.Usage{WebSearchRequests: 3}},
	} {
		ex := &exchange{stream: stream{req: request{endpoint: tt.endpoint, prompt: 10}, tr: usageTranslator{u: tt.u}}, answer: answer{delivery: sent}}
		u, estimated := ex.usageToCharge()
		if !estimated || u.PromptTokens != 10 || u.AudioSeconds != tt.u.AudioSeconds || u.Images != tt.u.Images ||
			u.WebSearchRequests != tt.u.WebSearchRequests {
			t.Errorf("%s: charged %+v (estimated %v), want the provider's audio seconds, images and web searches", tt.endpoint, u, estimated)
		}
	}
}

// generatedText reads any bytes without failing, never counts more than
// it was given, and counts a delta's content exactly, escapes included,
// whatever the text holds and however the chunk is spaced.
func FuzzGeneratedText(f *testing.F) {
	for _, s := range []string{"Hello", `a":"b`, "\n\t\"\\", "{\"content\":\"x\"}", "\u2028é\xff", ""} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, spaced bool) {
		for _, in := range []textIn{chatChunks, responsesEvents, wholeAnswer} {
			if n := generatedText([]byte(s), in); n < 0 || n > len(s) {
				t.Fatalf("generatedText(%q) = %d", s, n)
			}
		}
		v, _ := json.Marshal(s)
		chunk := `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":` + string(v) + `}}]}`
		if spaced {
			chunk = `data: {"choices" : [ {"index" : 0, "delta" :` + "\n\t" + `{"role" : "assistant", "content" :  ` + string(v) + `} } ]}`
		}
		if got, want := generatedText([]byte(chunk), chatChunks), len(v)-2; got != want {
			t.Fatalf("generatedText(%s) = %d, want %d", chunk, got, want)
		}
	})
}

// One chat chunk's count, as every streamed chunk pays it.
func BenchmarkGeneratedText(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-AbCdEf","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-mini-2024-07-18",` +
		`"system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" capital of France is Paris."},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		generatedText(chunk, chatChunks)
	}
}
