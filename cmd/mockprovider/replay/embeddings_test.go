package replay

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
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
	"modelgate/translate/vertex"
)

// embeddingTargets are the mock's embeddings endpoints as the gateway
// reaches them, with the dev models' upstream names.
var embeddingTargets = []struct {
	name, model string
	newFor      func(translate.Target, *api.EmbeddingsRequest) translate.Translator
	dims        int // a dimensions value the model takes; 0 for none
	single      bool
}{
	{"openai", "text-embedding-3-small", openai.NewEmbeddings, 256, false},
	{"azure", "text-embedding-3-small", azure.NewEmbeddings, 256, false},
	{"mistral", "mistral-embed", openai.NewCompatibleEmbeddings(openai.CompatibleProviders()["mistral"]), 0, false},
	{"codestral", "codestral-embed", openai.NewCompatibleEmbeddings(openai.CompatibleProviders()["mistral"]), 512, false},
	{"gemini", "gemini-embedding-001", gemini.NewEmbeddings, 256, false},
	{"vertex", "text-embedding-005", vertex.NewEmbeddings, 256, false},
	{"vertex-gemini", "gemini-embedding-001", vertex.NewEmbeddings, 768, true},
	{"titan", "amazon.titan-embed-text-v2:0", bedrock.NewEmbeddings, 256, true},
	{"titan-v1", "amazon.titan-embed-text-v1", bedrock.NewEmbeddings, 0, true},
	{"bedrock-cohere", "cohere.embed-english-v3", bedrock.NewEmbeddings, 0, false},
	{"bedrock-cohere-v4", "cohere.embed-v4:0", bedrock.NewEmbeddings, 512, false},
	{"cohere", "embed-v4.0", cohere.NewEmbeddings, 256, false},
}

// embeddingExchange sends a translated request to the mock and plays the
// answer back through the translator, as the gateway does.
func embeddingExchange(t *testing.T, url string, newFor func(translate.Target, *api.EmbeddingsRequest) translate.Translator,
	model, body string) (int, []byte, translate.Usage) {
	t.Helper()
	req, err := api.ParseEmbeddingsRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	tr := newFor(translate.Target{Model: model, APIKey: "mock-key", Project: "p", Region: "us-central1"}, req)
	up, err := tr.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	hreq, _ := http.NewRequest("POST", url+up.Path, bytes.NewReader(up.Body))
	for _, h := range up.Headers {
		hreq.Header.Set(h.Name, h.Value)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	head := tr.ResponseHeaders(resp.StatusCode, resp.Header.Get("Content-Type"))
	out, err := tr.ResponseBody(raw, true)
	if err != nil {
		t.Fatalf("the translator rejects the mock's answer (%d %s): %v", resp.StatusCode, raw, err)
	}
	return head.Status, out, tr.Usage()
}

func embeddingVectors(t *testing.T, body []byte) [][]float32 {
	t.Helper()
	var r struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var out [][]float32
	for _, d := range r.Data {
		var v []float32
		var s string
		if json.Unmarshal(d.Embedding, &s) == nil {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw)%4 != 0 {
				t.Fatalf("not base64 float32: %q", s)
			}
			for i := 0; i < len(raw); i += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
			}
		} else if err := json.Unmarshal(d.Embedding, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// Every embeddings endpoint answers the translated request with a body the
// translator accepts: one vector per input, float and base64 alike, the
// requested dimensions, and usage.
func TestEmbeddingEndpoints(t *testing.T) {
	s, ts := start(t, Config{APIKey: "mock-key"})
	for _, tt := range embeddingTargets {
		t.Run(tt.name, func(t *testing.T) {
			input := `["The food was delicious.","The waiter was friendly."]`
			n := 2
			if tt.single {
				input, n = `"The food was delicious."`, 1
			}
			status, floats, usage := embeddingExchange(t, ts.URL, tt.newFor, tt.model, `{"model":"m","input":`+input+`}`)
			if status != 200 {
				t.Fatalf("status %d: %s (upstream request %s)", status, floats, s.Requests()[len(s.Requests())-1].Body)
			}
			spec.ValidateT(t, "CreateEmbeddingResponse", floats)
			fv := embeddingVectors(t, floats)
			if len(fv) != n || len(fv[0]) == 0 || usage.PromptTokens <= 0 || usage.TotalTokens != usage.PromptTokens {
				t.Fatalf("%d vectors, usage %+v: %.300s", len(fv), usage, floats)
			}
			status, b64, _ := embeddingExchange(t, ts.URL, tt.newFor, tt.model, `{"model":"m","input":`+input+`,"encoding_format":"base64"}`)
			bv := embeddingVectors(t, b64)
			// OpenAI's base64 answer replays another recording than its
			// float one.
			if status != 200 || len(bv) != n || tt.name != "openai" && fmt.Sprint(bv) != fmt.Sprint(fv) {
				t.Errorf("base64 answer (%d) differs from the float one: %.300s", status, b64)
			}
			if tt.dims == 0 {
				return
			}
			status, short, _ := embeddingExchange(t, ts.URL, tt.newFor, tt.model, fmt.Sprintf(`{"model":"m","input":%s,"dimensions":%d}`, input, tt.dims))
			if sv := embeddingVectors(t, short); status != 200 || len(sv) != n || len(sv[0]) != tt.dims {
				t.Errorf("dimensions %d: %d %.300s", tt.dims, status, short)
			}
		})
	}
}

// The models the recorded errors asked for get those errors back, in the
// OpenAI shape once translated.
func TestEmbeddingRecordedErrors(t *testing.T) {
	_, ts := start(t, Config{})
	tests := []struct {
		name, model string
		newFor      func(translate.Target, *api.EmbeddingsRequest) translate.Translator
		status      int
		message     string
	}{
		{"openai", "nonexistent", openai.NewEmbeddings, 404, "The model `nonexistent` does not exist"},
		{"openai unknown model", "text-embedding-4-ultra", openai.NewEmbeddings, 404, "The model `text-embedding-4-ultra` does not exist"},
		{"gemini", "nonexistent-model", gemini.NewEmbeddings, 404, "models/nonexistent-model is not found"},
		{"cohere", "nonexistent", cohere.NewEmbeddings, 404, "model 'nonexistent' not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out, _ := embeddingExchange(t, ts.URL, tt.newFor, tt.model, `{"model":"m","input":["Hello, world!"]}`)
			spec.ValidateT(t, "ErrorResponse", out)
			if status != tt.status || !strings.Contains(string(out), tt.message) {
				t.Errorf("%d %s", status, out)
			}
		})
	}
}

// The mock holds the line where its provider would.
func TestEmbeddingProviderChecks(t *testing.T) {
	_, ts := start(t, Config{})
	tests := []struct {
		name, path, body string
		status           int
	}{
		{"mistral rejects foreign members", "/v1/embeddings", `{"model":"mistral-embed","input":"a","user":"u"}`, 422},
		{"mistral-embed cannot shorten", "/v1/embeddings", `{"model":"mistral-embed","input":"a","output_dimension":256}`, 400},
		{"azure needs api-version", "/openai/deployments/d/embeddings", `{"input":"a"}`, 404},
		{"gemini batch model must match", "/v1beta/models/gemini-embedding-001:batchEmbedContents",
			`{"requests":[{"model":"models/other","content":{"parts":[{"text":"a"}]}}]}`, 400},
		{"gemini dimensions", "/v1beta/models/gemini-embedding-001:embedContent", `{"content":{"parts":[{"text":"a"}]},"outputDimensionality":4000}`, 400},
		{"vertex gemini-embedding takes one instance", "/v1/projects/p/locations/l/publishers/google/models/gemini-embedding-001:predict",
			`{"instances":[{"content":"a"},{"content":"b"}]}`, 400},
		{"titan v2 dimensions", "/model/amazon.titan-embed-text-v2:0/invoke", `{"inputText":"a","dimensions":300}`, 400},
		{"titan v1 takes inputText only", "/model/amazon.titan-embed-text-v1/invoke", `{"inputText":"a","dimensions":256}`, 400},
		{"bedrock cohere needs input_type", "/model/cohere.embed-english-v3/invoke", `{"texts":["a"]}`, 400},
		{"cohere v3 cannot shorten", "/v2/embed", `{"model":"embed-english-v3.0","texts":["a"],"input_type":"search_document","embedding_types":["float"],"output_dimension":256}`, 400},
		{"cohere batch limit", "/v2/embed", `{"model":"embed-v4.0","texts":[` + strings.Repeat(`"a",`, 96) + `"a"],"input_type":"search_document","embedding_types":["float"]}`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
		})
	}
}

// A predict or invoke request that is not for embeddings is left to the
// other handlers of the shared route.
func TestEmbeddingHooksLeaveOthers(t *testing.T) {
	_, ts := start(t, Config{})
	for _, path := range []string{"/v1/projects/p/locations/l/publishers/google/models/imagen-4.0-generate-001:predict", "/model/amazon.nova-canvas-v1:0/invoke"} {
		resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(`{"instances":[{"prompt":"a cat"}],"taskType":"TEXT_IMAGE"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(body, []byte(`"embedding`)) || bytes.Contains(body, []byte(`"predictions":[{"embeddings"`)) {
			t.Errorf("%s answered as embeddings: %s", path, body)
		}
	}
}
