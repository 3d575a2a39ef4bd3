package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/azure"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/translatetest"
	"modelgate/translate/vertex"
)

// The embeddings translators of every provider, side by side: what each
// sends upstream for the same client requests, and what the client gets
// back from each provider's answers. Goldens live under
// testdata/embeddings/{requests,responses}/<provider>/; -update rewrites
// them.

type embeddingsProvider struct {
	name, model string
	newFor      func(translate.Target, *api.EmbeddingsRequest) translate.Translator
}

func embeddingsProviders() []embeddingsProvider {
	compatible := func(name string) func(translate.Target, *api.EmbeddingsRequest) translate.Translator {
		return openai.NewCompatibleEmbeddings(openai.CompatibleProviders()[name])
	}
	return []embeddingsProvider{
		{"openai", "text-embedding-3-small", openai.NewEmbeddings},
		{"azure", "my-embedding-deployment", azure.NewEmbeddings},
		{"mistral", "mistral-embed", compatible("mistral")},
		{"mistral-codestral", "codestral-embed", compatible("mistral")},
		{"vllm", "BAAI/bge-m3", compatible("vllm")},
		{"gemini", "gemini-embedding-001", gemini.NewEmbeddings},
		{"gemini-embedding-001-legacy", "embedding-001", gemini.NewEmbeddings},
		{"vertex", "text-embedding-005", vertex.NewEmbeddings},
		{"vertex-gemini-embedding", "gemini-embedding-001", vertex.NewEmbeddings},
		{"bedrock-titan-v2", "amazon.titan-embed-text-v2:0", bedrock.NewEmbeddings},
		{"bedrock-titan-v1", "amazon.titan-embed-text-v1", bedrock.NewEmbeddings},
		{"bedrock-cohere-v3", "cohere.embed-english-v3", bedrock.NewEmbeddings},
		{"bedrock-cohere-v4", "us.cohere.embed-v4:0", bedrock.NewEmbeddings},
		{"bedrock-unknown", "amazon.titan-embed-image-v1", bedrock.NewEmbeddings},
		{"cohere", "embed-v4.0", cohere.NewEmbeddings},
		{"cohere-v3", "embed-english-v3.0", cohere.NewEmbeddings},
	}
}

var embeddingsRequestCases = map[string]string{
	"one-text":          `{"model":"m","input":"The food was delicious."}`,
	"texts":             `{"model":"m","input":["The food was delicious.","The waiter was friendly.","Prices were fair."]}`,
	"base64-dimensions": `{"model":"m","input":["The food was delicious.","The waiter was friendly."],"encoding_format":"base64","dimensions":256,"user":"u-1"}`,
	"dimensions-300":    `{"model":"m","input":"The food was delicious.","dimensions":300}`,
	"token-arrays":      `{"model":"m","input":[[791,3691,574,18406],[791,69521]]}`,
	"batch-of-101":      `{"model":"m","input":["x"` + strings.Repeat(`,"x"`, 100) + `]}`,
}

func TestEmbeddingsRequestGoldens(t *testing.T) {
	for _, p := range embeddingsProviders() {
		for name, body := range embeddingsRequestCases {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				req, err := api.ParseEmbeddingsRequest([]byte(body))
				if err != nil {
					t.Fatalf("case is not a valid request: %v", err)
				}
				target := translate.Target{Backend: "b", Provider: p.name, Model: p.model, APIKey: "provider-key", Project: "proj", Region: "us-central1"}
				up, err := p.newFor(target, req).RequestBody()
				translatetest.Golden(t, filepath.Join("testdata", "embeddings", "requests", p.name, name+".json"), requestGolden(t, up, err))
			})
		}
	}
}

// requestGolden renders the upstream request as translatetest.UpstreamJSON
// does, or the client's error with the status and type the client gets.
// The provider key is in the headers: it must be there, exactly once.
func requestGolden(t *testing.T, up translate.Upstream, err error) []byte {
	t.Helper()
	var re *api.RequestError
	if errors.As(err, &re) {
		status := re.Status
		if status == 0 {
			status = 400
		}
		b, _ := json.MarshalIndent(map[string]any{"client_error": map[string]any{"status": status, "type": "invalid_request_error", "param": re.Param, "code": re.Code, "message": re.Message}}, "", "  ")
		return append(b, '\n')
	}
	if err == nil {
		keys := 0
		for _, h := range up.Headers {
			if strings.Contains(h.Value, "provider-key") {
				keys++
			}
		}
		if keys != 1 {
			t.Errorf("the provider key is in %d headers", keys)
		}
	}
	return translatetest.UpstreamJSON(t, up, err)
}

// The providers' answers: recorded errors, and successes in each
// provider's documented response shape (hand-written, three dimensions;
// no success traffic of these providers was recorded).
var embeddingsResponseCases = []struct {
	name, provider, request string
	status                  int
	body                    string // or a file under testdata/fixtures
}{
	{"gemini-one", "gemini", `{"model":"m","input":"hi there"}`, 200, `{"embedding":{"values":[0.0123,-0.25,1e-7]}}`},
	{"gemini-batch-base64", "gemini", `{"model":"m","input":["hi","there"],"encoding_format":"base64"}`, 200,
		`{"embeddings":[{"values":[0.0123,-0.25,1e-7]},{"values":[0.5,0,-1]}]}`},
	{"gemini-recorded-error", "gemini", `{"model":"m","input":["Hello, world!"]}`, 404, "gemini/TestGoogle.test_embed_error.bodies/00.response.json"},
	{"gemini-key-rejected", "gemini", `{"model":"m","input":"hi"}`, 403, `{"error":{"code":403,"message":"API key not valid: AIza...","status":"PERMISSION_DENIED"}}`},
	{"vertex", "vertex", `{"model":"m","input":["hi","there"]}`, 200,
		`{"predictions":[{"embeddings":{"statistics":{"truncated":false,"token_count":2},"values":[0.0123,-0.25,1e-7]}},{"embeddings":{"statistics":{"truncated":false,"token_count":1.0},"values":[0.5,0,-1]}}],"metadata":{"billableCharacterCount":7}}`},
	{"vertex-error", "vertex", `{"model":"m","input":"hi"}`, 400,
		`{"error":{"code":400,"message":"Unable to submit request because the input token count is 30000 but the model supports up to 20000.","status":"INVALID_ARGUMENT"}}`},
	{"bedrock-titan", "bedrock-titan-v2", `{"model":"m","input":"hi there","encoding_format":"base64"}`, 200,
		`{"embedding":[0.0123,-0.25,1e-7],"inputTextTokenCount":3,"embeddingsByType":{"float":[0.0123,-0.25,1e-7]}}`},
	{"bedrock-cohere-by-type", "bedrock-cohere-v3", `{"model":"m","input":["hi","there"]}`, 200,
		`{"id":"e1","embeddings":{"float":[[0.0123,-0.25,1e-7],[0.5,0,-1]]},"response_type":"embeddings_by_type","texts":["hi","there"]}`},
	{"bedrock-cohere-floats", "bedrock-cohere-v3", `{"model":"m","input":["hi","there"]}`, 200,
		`{"id":"e1","embeddings":[[0.0123,-0.25,1e-7],[0.5,0,-1]],"response_type":"embeddings_floats","texts":["hi","there"]}`},
	{"bedrock-validation-error", "bedrock-titan-v2", `{"model":"m","input":"hi"}`, 400, `{"message":"Malformed input request: #: extraneous key [x] is not permitted"}`},
	{"bedrock-model-error", "bedrock-titan-v2", `{"model":"m","input":"hi"}`, 424, `{"message":"The model failed"}`},
	{"cohere", "cohere", `{"model":"m","input":["hi","there"],"encoding_format":"base64"}`, 200,
		`{"id":"c1","embeddings":{"float":[[0.0123,-0.25,1e-7],[0.5,0,-1]]},"texts":["hi","there"],"meta":{"api_version":{"version":"2"},"billed_units":{"input_tokens":2}},"response_type":"embeddings_by_type"}`},
	{"cohere-recorded-error", "cohere", `{"model":"m","input":["Hello, world!"]}`, 404, "cohere/TestCohere.test_embed_error.bodies/00.response.json"},
	{"azure-recorded", "azure", `{"model":"m","input":"How do I reset my password?","encoding_format":"base64"}`, 200,
		"openai/embeddings/embeddings-base64.bodies/00.response.json"},
}

func TestEmbeddingsResponseGoldens(t *testing.T) {
	providers := map[string]embeddingsProvider{}
	for _, p := range embeddingsProviders() {
		providers[p.name] = p
	}
	for _, tc := range embeddingsResponseCases {
		t.Run(tc.name, func(t *testing.T) {
			p := providers[tc.provider]
			req, err := api.ParseEmbeddingsRequest([]byte(tc.request))
			if err != nil {
				t.Fatal(err)
			}
			tr := p.newFor(translate.Target{Model: p.model, APIKey: "k", Project: "proj"}, req)
			if _, err := tr.RequestBody(); err != nil {
				t.Fatal(err)
			}
			body := []byte(tc.body)
			if !strings.HasPrefix(tc.body, "{") {
				body = translatetest.ReadFile(t, "../../testdata/fixtures/"+tc.body)
			}
			head := tr.ResponseHeaders(tc.status, "application/json")
			out, err := tr.ResponseBody(body, true)
			if err != nil {
				t.Fatal(err)
			}
			if head.Stream || head.ContentType != "application/json" {
				t.Errorf("head = %+v", head)
			}
			var b bytes.Buffer
			json.Indent(&b, out, "", "  ")
			golden, _ := json.MarshalIndent(map[string]any{"status": head.Status, "usage": tr.Usage()}, "", "  ")
			translatetest.Golden(t, filepath.Join("testdata", "embeddings", "responses", tc.name+".json"), append(append(golden, '\n'), append(b.Bytes(), '\n')...))
			if tc.status/100 != 2 {
				spec.ValidateT(t, "ErrorResponse", out)
				return
			}
			var floats struct {
				Data []struct {
					Embedding json.RawMessage `json:"embedding"`
				} `json:"data"`
			}
			json.Unmarshal(out, &floats)
			openai.ValidateEmbeddings(t, out) // base64 vectors as the floats they encode
			if u := tr.Usage(); len(floats.Data) != len(req.Texts) || u.PromptTokens <= 0 || u.TotalTokens != u.PromptTokens {
				t.Errorf("%d embeddings for %d inputs, usage %+v", len(floats.Data), len(req.Texts), u)
			}
		})
	}
}
