package bedrock_test

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/bedrock"
	"modelgate/translate/translatetest"
)

func TestUnusableSuccessBodies(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return bedrock.NewChat(translate.Target{Provider: "bedrock", Model: "us.amazon.nova-micro-v1:0", APIKey: "k"}, req)
		}, "application/json", `{}`, `{"output":null}`, `{"output":"x"}`, `{"output":{}}`, `{"output":{"message":null}}`,
			`{"output":{"message":"x"}}`, `{"output":{"message":{"content":"x"}}}`, `{"output":{"message":{"content":[null]}}}`,
			`{"output":{"message":{"content":[1]}}}`)
	})
	t.Run("embeddings", func(t *testing.T) {
		for model, extra := range map[string][]string{
			"amazon.titan-embed-text-v2:0": {`{}`, `{"embedding":null}`, `{"embedding":"x"}`, `{"embedding":[null]}`, `{"embedding":{}}`},
			"cohere.embed-english-v3":      {`{}`, `{"embeddings":null}`, `{"embeddings":"x"}`, `{"embeddings":[null]}`, `{"embeddings":{"float":[null]}}`, `{"embeddings":{"float":"x"}}`},
		} {
			req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			translatetest.CheckUnusable(t, func() translate.Translator {
				return bedrock.NewEmbeddings(translate.Target{Provider: "bedrock", Model: model, APIKey: "k"}, req)
			}, "application/json", extra...)
		}
	})
	t.Run("images", func(t *testing.T) {
		req, err := api.ParseImagesRequest([]byte(`{"model":"m","prompt":"a cat"}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return bedrock.NewImages(translate.Target{Provider: "bedrock", Model: "amazon.nova-canvas-v1:0", APIKey: "k"}, req)
		}, "application/json", `{}`, `{"images":null}`, `{"images":"x"}`, `{"images":[null]}`, `{"images":[1]}`,
			`{"images":["not base64!"]}`, `{"error":5}`)
	})
}

func TestErrorBodiesBounded(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	images, err := api.ParseImagesRequest([]byte(`{"model":"m","prompt":"a cat"}`))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 100000)
	for _, body := range []string{`{"message":"` + long + `"}`, `{"message":"content filter ` + long + `"}`, `{"message":""}`,
		`{"Message":null}`, "<html><title>Bad</title>" + long, long, ""} {
		for _, tr := range []translate.Translator{
			bedrock.NewChat(translate.Target{Provider: "bedrock", Model: "us.amazon.nova-micro-v1:0", APIKey: "k"}, req),
			bedrock.NewImages(translate.Target{Provider: "bedrock", Model: "amazon.nova-canvas-v1:0", APIKey: "k"}, images),
		} {
			tr.ResponseHeaders(400, "application/json")
			out, err := tr.ResponseBody([]byte(body), true)
			if err != nil {
				t.Fatal(err)
			}
			translatetest.CheckErrorBody(t, out, 4100)
		}
	}
}
