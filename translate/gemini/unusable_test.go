package gemini_test

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/gemini"
	"modelgate/translate/translatetest"
)

func TestUnusableSuccessBodies(t *testing.T) {
	target := translate.Target{Provider: "gemini", Model: "gemini-2.5-flash"}
	t.Run("chat", func(t *testing.T) {
		req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator { return gemini.NewChat(target, req) }, "application/json",
			`{}`, `{"candidates":null}`, `{"candidates":"x"}`, `{"candidates":{}}`, `{"candidates":[null]}`, `{"candidates":[1]}`,
			`{"candidates":[{"content":"x"}]}`, `{"candidates":[{"content":{"parts":[1]}}]}`, `{"usageMetadata":"x"}`)
	})
	t.Run("embeddings", func(t *testing.T) {
		for _, input := range []string{`"hi"`, `["a","b"]`} {
			req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":` + input + `}`))
			if err != nil {
				t.Fatal(err)
			}
			translatetest.CheckUnusable(t, func() translate.Translator {
				return gemini.NewEmbeddings(translate.Target{Provider: "gemini", Model: "gemini-embedding-001"}, req)
			}, "application/json", `{}`, `{"embedding":null}`, `{"embedding":{}}`, `{"embedding":{"values":null}}`,
				`{"embedding":{"values":"x"}}`, `{"embedding":{"values":[1,"a"]}}`, `{"embeddings":[null]}`, `{"embeddings":"x"}`)
		}
	})
	t.Run("images", func(t *testing.T) {
		req, err := api.ParseImagesRequest([]byte(`{"model":"m","prompt":"a cat"}`))
		if err != nil {
			t.Fatal(err)
		}
		translatetest.CheckUnusable(t, func() translate.Translator {
			return gemini.NewImages(translate.Target{Provider: "gemini", Model: "imagen-4.0-generate-001"}, req)
		}, "application/json", `{"predictions":"x"}`, `{"predictions":{}}`, `{"predictions":[null]}`, `{"predictions":[1]}`,
			`{"predictions":[{"bytesBase64Encoded":"not base64!"}]}`)
	})
}

// Google error bodies become OpenAI errors with a bounded, non-empty
// message and a null code when Google names no status.
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
	for _, tt := range []struct {
		status   int
		body     string
		wantCode string
	}{
		{400, `{"error":{"code":400,"message":"no status"}}`, ""},
		{400, `{"error":{"code":400,"message":"` + long + `","status":"INVALID_ARGUMENT"}}`, "invalid_argument"},
		{400, `{"error":{"code":400,"message":"Responsible AI ` + long + `"}}`, "content_policy_violation"},
		{500, `{"error":{"message":"","status":"INTERNAL"}}`, ""},
		{503, "<html><head><title>Unavailable</title></head>" + long + "</html>", ""},
	} {
		for i, tr := range []translate.Translator{
			gemini.NewChat(translate.Target{Provider: "gemini", Model: "gemini-2.5-flash"}, req),
			gemini.NewImages(translate.Target{Provider: "gemini", Model: "imagen-4.0-generate-001"}, images),
		} {
			tr.ResponseHeaders(tt.status, "application/json")
			out, err := tr.ResponseBody([]byte(tt.body), true)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.wantCode
			if want == "content_policy_violation" && i == 0 { // only Imagen refuses prompts
				want = ""
			}
			if _, code := translatetest.CheckErrorBody(t, out, 4100); code != want {
				t.Errorf("%d %.60s: code %q, want %q", i, tt.body, code, want)
			}
		}
	}
}
