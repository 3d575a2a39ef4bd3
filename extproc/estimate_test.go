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
		u, estimated := ex.answer.usageToCharge(&ex.req, ex.tr)
		if !estimated || u.PromptTokens != 10 || u.AudioSeconds != tt.u.AudioSeconds || u.Images != tt.u.Images ||
			u.WebSearchRequests != tt.u.WebSearchRequests {
			t.Errorf("%s: charged %+v (estimated %v), want the provider's audio seconds, images and web searches", tt.endpoint, u, estimated)
		}
	}
}
