package openai

import (
	"errors"
	"sort"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// Chat completion shapes that break CreateChatCompletionResponse.
var badCompletions = []string{`{}`, `{"id":"x"}`, `{"choices":null}`, `{"choices":"x"}`, `{"choices":{}}`,
	`{"choices":[null]}`, `{"choices":[1]}`, `{"choices":[[]]}`, `{"choices":[{"message":"x"}]}`, `{"choices":[{"message":[]}]}`,
	`{"choices":[{"index":0}],"usage":`, `{"choices":[{"message":{"role":"assistant","tool_calls":{"id":"a"}}}]}`}

// Every buffered translator of this package answers a success body it
// cannot use with an error wrapping translate.ErrUpstream, never a panic.
func TestUnusableSuccessBodies(t *testing.T) {
	t.Run("chat/openai", func(t *testing.T) {
		translatetest.CheckUnusable(t, func() translate.Translator {
			return newChat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		}, "application/json", badCompletions...)
	})
	quirks := CompatibleProviders()
	names := make([]string, 0, len(quirks))
	for name := range quirks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run("chat/"+name, func(t *testing.T) {
			req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}],"max_completion_tokens":9}`))
			if err != nil {
				t.Fatal(err)
			}
			translatetest.CheckUnusable(t, func() translate.Translator {
				return NewCompatibleChat(quirks[name])(translate.Target{Provider: name, Model: "m"}, req)
			}, "application/json", badCompletions...)
		})
		t.Run("embeddings/"+name, func(t *testing.T) {
			for _, input := range []string{`"hello"`, `["a","b"]`} {
				req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":` + input + `}`))
				if err != nil {
					t.Fatal(err)
				}
				translatetest.CheckUnusable(t, func() translate.Translator {
					return NewCompatibleEmbeddings(quirks[name])(translate.Target{Provider: name, Model: "m"}, req)
				}, "application/json", badEmbeddings...)
			}
		})
	}
	t.Run("embeddings/openai", func(t *testing.T) {
		for _, body := range []string{`{"model":"m","input":"hello"}`, `{"model":"m","input":"hello","encoding_format":"base64"}`, `{"model":"m","input":[1,2]}`} {
			req, err := api.ParseEmbeddingsRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			translatetest.CheckUnusable(t, func() translate.Translator {
				return NewEmbeddings(translate.Target{Provider: "openai", Model: "text-embedding-3-small"}, req)
			}, "application/json", badEmbeddings...)
		}
	})
	t.Run("images/openai", func(t *testing.T) {
		for _, model := range []string{"dall-e-3", "gpt-image-1", "unknown"} {
			translatetest.CheckUnusable(t, func() translate.Translator {
				return newImages(t, `{"model":"m","prompt":"a cat"}`, translate.Target{Provider: "openai", Model: model})
			}, "application/json", `{}`, `{"created":1}`, `{"data":null}`, `{"data":"x"}`, `{"data":{}}`, `{"data":[null]}`, `{"data":[1]}`,
				`{"data":[{"url":"https://x"}],"usage":`)
		}
	})
	for _, format := range []string{"json", "verbose_json", "text", "srt", "vtt"} {
		t.Run("transcription/"+format+"/json", func(t *testing.T) {
			translatetest.CheckUnusable(t, func() translate.Translator {
				return newTranscriptionTr(t, Quirks{}, format)
			}, "application/json", `{}`, `{"text":null}`, `{"text":1}`, `{"text":["x"]}`, `{"segments":[]}`)
		})
		t.Run("transcription/"+format+"/html", func(t *testing.T) {
			for _, body := range []string{"", "<html><body>Bad gateway</body></html>"} {
				out, err := translatetest.PlayBuffered(t, func() translate.Translator { return newTranscriptionTr(t, Quirks{}, format) }, "text/html", body)
				if !errors.Is(err, translate.ErrUpstream) {
					t.Errorf("HTML page %q: ResponseBody = %q, %v; want ErrUpstream", body, out, err)
				}
			}
		})
	}
	// Verbose JSON cannot be made of text: a plain-text answer to it is
	// unusable, even an empty one.
	t.Run("transcription/verbose_json/text", func(t *testing.T) {
		for _, body := range []string{"", "hello"} {
			out, err := translatetest.PlayBuffered(t, func() translate.Translator { return newTranscriptionTr(t, Quirks{}, "verbose_json") }, "text/plain", body)
			if !errors.Is(err, translate.ErrUpstream) {
				t.Errorf("text %q: ResponseBody = %q, %v; want ErrUpstream", body, out, err)
			}
		}
	})
}

// Embeddings shapes that break CreateEmbeddingResponse.
var badEmbeddings = []string{`{}`, `{"data":null}`, `{"data":{}}`, `{"data":"x"}`, `{"data":[null]}`, `{"data":[1]}`,
	`{"data":[{"embedding":null}]}`, `{"data":[{"embedding":"%%%"}]}`, `{"data":[{"embedding":[1,"a"]}]}`, `{"data":[{"embedding":{}}]}`,
	`{"object":"list","data":[{"object":"embedding","index":0,"embedding":null}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`}

// A text-format transcription of silence is empty: an empty plain-text
// answer passes for text, srt and vtt, and json made of it has empty text.
func TestEmptyPlainTextTranscription(t *testing.T) {
	for format, want := range map[string]string{"text": "", "srt": "", "vtt": "", "json": `{"text":""}`} {
		out, err := translatetest.PlayBuffered(t, func() translate.Translator { return newTranscriptionTr(t, Quirks{}, format) }, "text/plain", "")
		if err != nil || string(out) != want {
			t.Errorf("%s: ResponseBody(empty text) = %q, %v; want %q", format, out, err, want)
		}
	}
}
