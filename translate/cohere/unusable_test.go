package cohere_test

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/cohere"
	"modelgate/translate/translatetest"
)

func TestUnusableSuccessBodies(t *testing.T) {
	target := translate.Target{Provider: "cohere", Model: "command-a-03-2025"}
	t.Run("chat", func(t *testing.T) {
		req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator { return cohere.NewChat(target, req) }, "application/json",
			`{}`, `{"id":5}`, `{"finish_reason":"COMPLETE"}`, `{"id":"x","message":"x"}`, `{"id":"x","message":{"content":"x"}}`,
			`{"id":"x","message":{"content":[null]}}`, `{"id":"x","message":{"content":[1]}}`, `{"id":"x","message":{"tool_calls":[null]}}`)
	})
	t.Run("embeddings", func(t *testing.T) {
		req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":["a","b"]}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return cohere.NewEmbeddings(translate.Target{Provider: "cohere", Model: "embed-v4.0"}, req)
		}, "application/json", `{}`, `{"embeddings":null}`, `{"embeddings":[]}`, `{"embeddings":{"float":null}}`,
			`{"embeddings":{"float":[null,null]}}`, `{"embeddings":{"float":[[1]]}}`, `{"embeddings":{"float":"x"}}`)
	})
}

func TestErrorBodiesBounded(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 100000)
	for _, body := range []string{`{"message":"` + long + `"}`, `{"message":""}`, `{"id":"x"}`, "<html><title>Bad</title>" + long, long, ""} {
		tr := cohere.NewChat(translate.Target{Provider: "cohere", Model: "command-a-03-2025"}, req)
		tr.ResponseHeaders(500, "application/json")
		out, err := tr.ResponseBody([]byte(body), true)
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckErrorBody(t, out, 4100)
	}
}
