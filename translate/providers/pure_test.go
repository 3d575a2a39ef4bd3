package providers

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/responses"
)

// requests are client requests of every endpoint a translator is built
// from; the chat ones reach each piece of response-side state a
// translator keeps (a JSON answer through a tool, a thinking budget).
var requests = map[string][]string{
	"chat": {
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
		`{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","reasoning_effort":"high","max_completion_tokens":1000,"messages":[{"role":"user","content":"hi"}],
		  "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
	},
	"embeddings": {`{"model":"m","input":["a","b"]}`, `{"model":"m","input":"a","dimensions":8}`},
	"images":     {`{"model":"m","prompt":"a cat"}`},
	"responses": {
		`{"model":"m","input":"hi"}`,
		`{"model":"m","stream":true,"instructions":"be brief","input":[{"role":"user","content":"hi"}],"max_output_tokens":64}`,
	},
}

// form is a transcription request: its boundary is not the one the
// translators send.
const form = "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n" +
	"--b\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\nsrt\r\n" +
	"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\nID3\x00\x01\r\n--b--\r\n"

// builders returns, for each endpoint p serves and each request of it,
// a constructor of a fresh translator.
func builders(t *testing.T, p Provider, tg translate.Target) map[string]func() translate.Translator {
	t.Helper()
	out := map[string]func() translate.Translator{}
	for i, body := range requests["chat"] {
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		out["chat/"+string(rune('0'+i))] = func() translate.Translator { return p.Chat(tg, req) }
	}
	for i, body := range requests["embeddings"] {
		req, err := api.ParseEmbeddingsRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if p.Embeddings != nil {
			out["embeddings/"+string(rune('0'+i))] = func() translate.Translator { return p.Embeddings(tg, req) }
		}
	}
	img, err := api.ParseImagesRequest([]byte(requests["images"][0]))
	if err != nil {
		t.Fatal(err)
	}
	if p.Images != nil {
		out["images"] = func() translate.Translator { return p.Images(tg, img) }
	}
	audio, err := api.ParseTranscriptionRequest("multipart/form-data; boundary=b", []byte(form))
	if err != nil {
		t.Fatal(err)
	}
	if p.Transcription != nil {
		out["transcription"] = func() translate.Translator { return p.Transcription(tg, audio) }
	}
	for i, body := range requests["responses"] {
		req, err := responses.ParseRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		out["responses/"+string(rune('0'+i))] = func() translate.Translator {
			tr, err := p.ResponsesTranslator(tg, req, nil, "resp_1", 1700000000)
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
	}
	for i, body := range []string{`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":64,"stream":true,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`} {
		req, err := api.ParseMessagesRequest([]byte(body), false)
		if err != nil {
			t.Fatal(err)
		}
		out["messages/"+string(rune('0'+i))] = func() translate.Translator {
			tr, err := p.MessagesTranslator(tg, req)
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
	}
	count, err := api.ParseMessagesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if p.CountsTokens(tg.Model) {
		out["count_tokens"] = func() translate.Translator { return p.CountTokens(tg, count) }
	}
	compact, err := responses.ParseRequest([]byte(requests["responses"][1]))
	if err != nil {
		t.Fatal(err)
	}
	out["compact"] = func() translate.Translator {
		tr, err := p.CompactTranslator(tg, compact, nil, "resp_1", 1700000000)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	return out
}

// A translator's RequestBody is pure: called twice it gives the same
// upstream request, and it changes nothing in the translator (which
// equals one just built), so a request can be translated again, or a
// translator built for its answer alone. Bedrock is signed with its API
// key here: a SigV4 signature covers the clock, which the bedrock
// package's own test fixes.
func TestRequestBodyIsPure(t *testing.T) {
	ignore := cmp.Options{
		cmp.Exporter(func(reflect.Type) bool { return true }),
		// Clocks compare unequal whatever they are, and each form
		// and each Messages bridge gets a boundary or message id of
		// its own at construction.
		cmp.FilterPath(func(p cmp.Path) bool {
			sf, ok := p.Last().(cmp.StructField)
			return p.Last().Type().Kind() == reflect.Func || ok && (sf.Name() == "boundary" || sf.Name() == "id")
		}, cmp.Ignore()),
	}
	for _, p := range All() {
		tg := target
		tg.Provider, tg.AWS = p.Name, translate.AWSCredentials{}
		for name, build := range builders(t, p, tg) {
			t.Run(p.Name+"/"+name, func(t *testing.T) {
				fresh, tr := build(), build()
				first, err1 := tr.RequestBody()
				second, err2 := tr.RequestBody()
				if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
					t.Fatalf("errors %v, then %v", err1, err2)
				}
				if d := cmp.Diff(first, second); d != "" {
					t.Errorf("RequestBody called again gives another request (-first +second):\n%s", d)
				}
				if d := cmp.Diff(fresh, tr, ignore); d != "" {
					t.Errorf("RequestBody changed the translator (-built +after two calls):\n%s", d)
				}
			})
		}
	}
}

// Every header a provider's translators set (with either kind of
// credential) is one its table entry declares, so an attempt of a
// Fallback model removes what another provider's attempt left behind.
func TestProvidersDeclareTheirHeaders(t *testing.T) {
	withAWS := target
	withAWS.APIKey, withAWS.AWS.SessionToken = "", "token"
	for _, p := range All() {
		for _, tg := range []translate.Target{target, withAWS} {
			tg.Provider = p.Name
			for name, build := range builders(t, p, tg) {
				up, err := build().RequestBody()
				if err != nil {
					continue // a request this provider refuses sets nothing
				}
				for _, h := range up.Headers {
					if h.Name != strings.ToLower(h.Name) {
						t.Errorf("%s %s: header %q is not lower-case", p.Name, name, h.Name)
					}
					if h.Name != "content-type" && !slices.Contains(p.Headers, h.Name) {
						t.Errorf("%s %s: sets %s, which its table entry does not declare (%v)", p.Name, name, h.Name, p.Headers)
					}
				}
			}
		}
	}
	if got := RequestHeaders(); !slices.Contains(got, "x-amz-security-token") || !slices.Contains(got, "api-key") || slices.Contains(got, "content-type") {
		t.Errorf("RequestHeaders() = %v", got)
	}
}
