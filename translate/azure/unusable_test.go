package azure_test

import (
	"bytes"
	"mime/multipart"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/azure"
	"modelgate/translate/responses"
	"modelgate/translate/translatetest"
)

// Every buffered Azure translator answers a success body it cannot use
// with an error wrapping translate.ErrUpstream.
func TestUnusableSuccessBodies(t *testing.T) {
	target := translate.Target{Provider: "azure", Model: "dep", APIKey: "k"}
	t.Run("chat", func(t *testing.T) {
		req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator { return azure.NewChat(target, req) }, "application/json",
			`{}`, `{"choices":null}`, `{"choices":[null]}`, `{"choices":[{"message":"x"}]}`)
	})
	t.Run("embeddings", func(t *testing.T) {
		req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator { return azure.NewEmbeddings(target, req) }, "application/json",
			`{}`, `{"data":null}`, `{"data":[null]}`, `{"data":[{"embedding":"x"}]}`)
	})
	t.Run("images", func(t *testing.T) {
		req, err := api.ParseImagesRequest([]byte(`{"model":"m","prompt":"a cat"}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return azure.NewImages(translate.Target{Provider: "azure", Model: "dall-e-3"}, req)
		}, "application/json", `{}`, `{"data":null}`, `{"data":[null]}`, `{"data":"x"}`)
	})
	t.Run("transcription", func(t *testing.T) {
		for _, format := range []string{"json", "verbose_json"} {
			var buf bytes.Buffer
			w := multipart.NewWriter(&buf)
			fw, _ := w.CreateFormFile("file", "speech.wav")
			fw.Write([]byte("RIFF\x24\x00\x00\x00WAVEfmt "))
			w.WriteField("model", "whisper")
			w.WriteField("response_format", format)
			w.Close()
			req, err := api.ParseTranscriptionRequest(w.FormDataContentType(), buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			translatetest.CheckUnusable(t, func() translate.Translator { return azure.NewTranscription(target, req) }, "application/json",
				`{}`, `{"text":null}`, `{"text":5}`)
		}
	})
	t.Run("responses", func(t *testing.T) {
		req, err := responses.ParseRequest([]byte(`{"model":"m","input":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator { return azure.NewResponses(target, req, nil, "resp_1") }, "application/json",
			`{}`, `{"output":null}`, `{"output":"x"}`, `{"output":[null]}`)
	})
}
