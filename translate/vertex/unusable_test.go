package vertex_test

import (
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
	"modelgate/translate/vertex"
)

func TestUnusableSuccessBodies(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"gemini-2.5-flash", "claude-sonnet-4@20250514"} {
		t.Run("chat/"+model, func(t *testing.T) {
			translatetest.CheckUnusable(t, func() translate.Translator {
				return vertex.NewChat(translate.Target{Provider: "vertex", Model: model, Project: "p"}, req)
			}, "application/json", `{}`, `{"candidates":[null]}`, `{"id":"msg_1","content":[null]}`, `{"id":"msg_1","content":"x"}`)
		})
	}
	t.Run("embeddings", func(t *testing.T) {
		req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":["a","b"]}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return vertex.NewEmbeddings(translate.Target{Provider: "vertex", Model: "text-embedding-005", Project: "p"}, req)
		}, "application/json", `{}`, `{"predictions":null}`, `{"predictions":"x"}`, `{"predictions":[null,null]}`,
			`{"predictions":[{"embeddings":{"values":[1]}}]}`, `{"predictions":[{"embeddings":"x"},{}]}`)
	})
	t.Run("images", func(t *testing.T) {
		req, err := api.ParseImagesRequest([]byte(`{"model":"m","prompt":"a cat"}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return vertex.NewImages(translate.Target{Provider: "vertex", Model: "imagen-4.0-generate-001", Project: "p"}, req)
		}, "application/json", `{"predictions":[null]}`, `{"predictions":"x"}`)
	})
}
