package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/jsonscan"
	"modelgate/translate/translatetest"
)

func TestParseEmbeddingsRequestErrors(t *testing.T) {
	many := `"` + strings.Repeat(`x","`, api.MaxEmbeddingInputs) + `x"`
	tests := []struct {
		name, body, param, code string
	}{
		{"not json", `{`, "", ""},
		{"not an object", `[1]`, "", ""},
		{"missing model", `{"input":"hi"}`, "model", "missing_required_parameter"},
		{"null model", `{"model":null,"input":"hi"}`, "model", "missing_required_parameter"},
		{"empty model", `{"model":"","input":"hi"}`, "model", "missing_required_parameter"},
		{"model not a string", `{"model":3,"input":"hi"}`, "model", "invalid_type"},
		{"missing input", `{"model":"m"}`, "input", "missing_required_parameter"},
		{"empty string", `{"model":"m","input":""}`, "input", "invalid_value"},
		{"empty array", `{"model":"m","input":[]}`, "input", "invalid_value"},
		{"array with an empty string", `{"model":"m","input":["a",""]}`, "input", "invalid_value"},
		{"empty token array", `{"model":"m","input":[[1],[]]}`, "input", "invalid_value"},
		{"negative token", `{"model":"m","input":[1,-2]}`, "input", "invalid_value"},
		{"too many inputs", `{"model":"m","input":[` + many + `]}`, "input", "invalid_value"},
		{"input an object", `{"model":"m","input":{"text":"hi"}}`, "input", "invalid_type"},
		{"input a number", `{"model":"m","input":3}`, "input", "invalid_type"},
		{"mixed array", `{"model":"m","input":["a",1]}`, "input", "invalid_type"},
		{"fractional token", `{"model":"m","input":[1.5]}`, "input", "invalid_type"},
		{"array of objects", `{"model":"m","input":[{}]}`, "input", "invalid_type"},
		{"bad encoding_format", `{"model":"m","input":"hi","encoding_format":"invalid_format"}`, "encoding_format", "invalid_value"},
		{"encoding_format not a string", `{"model":"m","input":"hi","encoding_format":1}`, "encoding_format", "invalid_type"},
		{"dimensions zero", `{"model":"m","input":"hi","dimensions":0}`, "dimensions", "invalid_value"},
		{"dimensions negative", `{"model":"m","input":"hi","dimensions":-1}`, "dimensions", "invalid_value"},
		{"dimensions not an integer", `{"model":"m","input":"hi","dimensions":2.5}`, "dimensions", "invalid_type"},
		{"user not a string", `{"model":"m","input":"hi","user":7}`, "user", "invalid_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := api.ParseEmbeddingsRequest([]byte(tt.body))
			status, obj := clientError(t, err)
			if status != 400 || obj.Type != "invalid_request_error" || deref(obj.Param) != tt.param || deref(obj.Code) != tt.code {
				t.Errorf("got %d %s param=%q code=%q (%s), want 400 invalid_request_error param=%q code=%q",
					status, obj.Type, deref(obj.Param), deref(obj.Code), obj.Message, tt.param, tt.code)
			}
		})
	}
}

// clientError renders err as the ext_proc server does for a client: a
// RequestError's status (0 is 400), its type is invalid_request_error.
func clientError(t *testing.T, err error) (int, api.ErrorObject) {
	t.Helper()
	var re *api.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v, want a *RequestError", err)
	}
	status := re.Status
	if status == 0 {
		status = 400
	}
	obj := api.ErrorObject{Message: re.Message, Type: "invalid_request_error"}
	if re.Param != "" {
		obj.Param = &re.Param
	}
	if re.Code != "" {
		obj.Code = &re.Code
	}
	spec.ValidateT(t, "ErrorResponse", api.MarshalError(obj))
	return status, obj
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestParseEmbeddingsRequestValid(t *testing.T) {
	tests := []struct {
		body   string
		texts  []string
		tokens bool
		base64 bool
		dims   int
	}{
		{`{"model":"m","input":"hi"}`, []string{"hi"}, false, false, 0},
		{`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`, []string{"a", "b"}, false, true, 256},
		{`{"model":"m","input":"hi","encoding_format":"float","dimensions":null,"user":null}`, []string{"hi"}, false, false, 0},
		{`{"model":"m","input":[1212,318,0]}`, nil, true, false, 0},
		{`{"model":"m","input":[[1212,318],[13]]}`, nil, true, false, 0},
		{`{"model":"m","input":"hi","extra_body_member":{"kept":true}}`, []string{"hi"}, false, false, 0},
	}
	for _, tt := range tests {
		r, err := api.ParseEmbeddingsRequest([]byte(tt.body))
		if err != nil {
			t.Errorf("%s: %v", tt.body, err)
			continue
		}
		if r.Model != "m" || fmt.Sprint(r.Texts) != fmt.Sprint(tt.texts) || r.Tokens != tt.tokens || r.Base64 != tt.base64 || r.Dimensions != tt.dims {
			t.Errorf("%s: got %+v", tt.body, r)
		}
	}
}

// embeddingGoldens play recorded OpenAI traffic through the translator.
// The upstream body and what the client gets are golden files under
// testdata/embeddings/<case>/; -update rewrites them.
var embeddingGoldens = []struct {
	name     string
	provider string // "openai" or a compatible provider's name
	request  string // a recorded request, or a request body
	response string // the recorded response
	status   int
	// floats: the upstream answered with the recorded base64 vectors as
	// float arrays, as a server without base64 support would.
	floats bool
}{
	{"base64", "openai", "openai/embeddings/embeddings-base64.bodies/00.request.json", "openai/embeddings/embeddings-base64.bodies/00.response.json", 200, false},
	{"dimensions", "openai", "openai/embeddings/embeddings-dimensions.bodies/00.request.json", "openai/embeddings/embeddings-dimensions.bodies/00.response.json", 200, false},
	{"array-input", "openai", "openai/embeddings/TestOpenAI.test_query.bodies/00.request.json", "openai/embeddings/TestOpenAI.test_query.bodies/00.response.json", 200, false},
	{"float-from-base64-upstream", "openai", `{"model":"text-embedding-3-small","input":"How do I reset my password?"}`,
		"openai/embeddings/embeddings-base64.bodies/00.response.json", 200, false},
	{"vllm-base64-by-gateway", "vllm", "openai/embeddings/embeddings-base64.bodies/00.request.json", "openai/embeddings/embeddings-base64.bodies/00.response.json", 200, true},
	{"vllm-float", "vllm", `{"model":"text-embedding-3-small","input":"Generate embeddings with specific dimensions","dimensions":256}`,
		"openai/embeddings/embeddings-dimensions.bodies/00.response.json", 200, true},
	{"mistral-dimensions", "mistral", `{"model":"codestral-embed","input":["a"],"dimensions":256,"encoding_format":"base64","user":"u"}`,
		"openai/embeddings/embeddings-dimensions.bodies/00.response.json", 200, false},
	{"unknown-model", "openai", "openai/errors/embeddings-unknown-model.bodies/00.request.json", "openai/errors/embeddings-unknown-model.bodies/00.response.json", 404, false},
	{"embed-error", "openai", "openai/errors/TestOpenAI.test_embed_error.bodies/00.request.json", "openai/errors/TestOpenAI.test_embed_error.bodies/00.response.json", 404, false},
	{"bad-request", "openai", `{"model":"text-embedding-3-small","input":[102257]}`, "openai/errors/embeddings-bad-request.bodies/00.response.json", 400, false},
}

func TestEmbeddingGoldens(t *testing.T) {
	for _, tc := range embeddingGoldens {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.request)
			if !strings.HasPrefix(tc.request, "{") {
				body = translatetest.ReadFile(t, "../../testdata/fixtures/"+tc.request)
			}
			req, err := api.ParseEmbeddingsRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			newTr := NewEmbeddings
			if tc.provider != "openai" {
				newTr = NewCompatibleEmbeddings(CompatibleProviders()[tc.provider])
			}
			tr := newTr(translate.Target{Backend: "b", Provider: tc.provider, Model: req.Model, APIKey: "sk-provider"}, req)
			up, err := tr.RequestBody()
			if err != nil {
				t.Fatal(err)
			}
			recorded := translatetest.ReadFile(t, "../../testdata/fixtures/"+tc.response)
			upstream := recorded
			if tc.floats {
				upstream = base64AsFloats(t, recorded)
			}
			head := tr.ResponseHeaders(tc.status, "application/json")
			out, err := tr.ResponseBody(upstream, true)
			if err != nil {
				t.Fatal(err)
			}
			if head.Status != tc.status || head.Stream {
				t.Errorf("head = %+v", head)
			}
			dir := filepath.Join("testdata", "embeddings", tc.name)
			translatetest.Golden(t, filepath.Join(dir, "upstream.json"), indent(t, up.Body))
			translatetest.Golden(t, filepath.Join(dir, "client.json"), indent(t, out))
			if tc.status != 200 {
				spec.ValidateT(t, "ErrorResponse", out)
				return
			}
			validateEmbeddings(t, out)
			u := tr.Usage()
			if u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens {
				t.Errorf("usage = %+v", u)
			}
			// Whatever the upstream's encoding, the client gets the
			// recorded float32 values in its own.
			if got, want := vectorsOf(t, out), vectorsOf(t, recorded); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("vectors differ from the recording")
			}
			if asSent, _ := jsonscan.SetString(recorded, 0, "model", req.Model); req.Base64 && !tc.floats && !bytes.Equal(out, asSent) {
				t.Errorf("a base64 answer the client asked for is not passed through as sent, but for the client's model")
			}
			if req.Base64 && tc.floats && embeddingStrings(t, out)[0] != embeddingStrings(t, recorded)[0] {
				t.Errorf("the gateway's base64 differs from OpenAI's for the same float32 values")
			}
		})
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return append(out.Bytes(), '\n')
}

type embeddingsBody struct {
	Data []struct {
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
}

func embeddingStrings(t *testing.T, body []byte) []string {
	t.Helper()
	var r embeddingsBody
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range r.Data {
		var s string
		json.Unmarshal(d.Embedding, &s)
		out = append(out, s)
	}
	return out
}

// vectorsOf reads every vector of a response, float or base64, as float32.
func vectorsOf(t *testing.T, body []byte) [][]float32 {
	t.Helper()
	var r embeddingsBody
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, d := range r.Data {
		var s string
		if json.Unmarshal(d.Embedding, &s) == nil {
			out = append(out, decodeFloat32s(t, s))
			continue
		}
		var v []float32
		if err := json.Unmarshal(d.Embedding, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func decodeFloat32s(t testing.TB, s string) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%4 != 0 {
		t.Fatalf("%q is not base64 of float32 values: %v", s, err)
	}
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// base64AsFloats rewrites a recorded base64 response with float arrays, as
// encoding/json writes float32 values.
func base64AsFloats(t *testing.T, body []byte) []byte {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	for _, d := range r["data"].([]any) {
		d.(map[string]any)["embedding"] = decodeFloat32s(t, d.(map[string]any)["embedding"].(string))
	}
	b, _ := json.Marshal(r)
	return b
}

// ValidateEmbeddings is validateEmbeddings for the tests of package
// openai_test.
var ValidateEmbeddings = validateEmbeddings

// validateEmbeddings validates a response against CreateEmbeddingResponse.
// The OpenAPI document types embedding as a float array only, so base64
// vectors are validated as the float arrays they encode.
func validateEmbeddings(t *testing.T, body []byte) {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	data, _ := r["data"].([]any)
	for _, d := range data {
		if m, ok := d.(map[string]any); ok {
			if s, ok := m["embedding"].(string); ok {
				m["embedding"] = decodeFloat32s(t, s)
			}
		}
	}
	b, _ := json.Marshal(r)
	spec.ValidateT(t, "CreateEmbeddingResponse", b)
}

func TestEmbeddingsRequestBody(t *testing.T) {
	tests := []struct {
		name, provider, model, body string
		want                        string // the upstream body, or the client's param/code
	}{
		{"openai keeps everything", "openai", "up", `{"model":"m","input":[1,2],"encoding_format":"base64","dimensions":8,"user":"u","x":1}`,
			`{"dimensions":8,"encoding_format":"base64","input":[1,2],"model":"up","user":"u","x":1}`},
		{"gateway encodes base64", "vllm", "up", `{"model":"m","input":"a","encoding_format":"base64"}`, `{"input":"a","model":"up"}`},
		{"float stays", "ollama", "up", `{"model":"m","input":"a","encoding_format":"float"}`, `{"encoding_format":"float","input":"a","model":"up"}`},
		{"mistral names", "mistral", "codestral-embed", `{"model":"m","input":"a","dimensions":256,"user":"u","encoding_format":"base64"}`,
			`{"encoding_format":"base64","input":"a","model":"codestral-embed","output_dimension":256}`},
		{"mistral-embed cannot shorten", "mistral", "mistral-embed", `{"model":"m","input":"a","dimensions":256}`, "dimensions invalid_value"},
		{"mistral takes text only", "mistral", "mistral-embed", `{"model":"m","input":[1,2]}`, "input invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := api.ParseEmbeddingsRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			newTr := NewEmbeddings
			if tt.provider != "openai" {
				newTr = NewCompatibleEmbeddings(CompatibleProviders()[tt.provider])
			}
			up, err := newTr(translate.Target{Model: tt.model, BasePath: "/base", APIKey: "k"}, req).RequestBody()
			var re *api.RequestError
			switch {
			case errors.As(err, &re):
				if got := re.Param + " " + re.Code; got != tt.want {
					t.Errorf("error %s (%s), want %s", got, re.Message, tt.want)
				}
			case err != nil:
				t.Fatal(err)
			case string(up.Body) != tt.want || up.Path != "/base/v1/embeddings" || fmt.Sprint(up.Headers) != "[{content-type application/json} {authorization Bearer k}]":
				t.Errorf("got %s %s %v\nwant body %s", up.Path, up.Body, up.Headers, tt.want)
			}
		})
	}
}

// Providers' vectors are copied number by number, so float output is
// exactly what the provider sent; base64 is of the nearest float32.
func TestEmbeddingsResponseVectors(t *testing.T) {
	tests := []struct {
		vector    string
		float     string
		b64Floats []float32
	}{
		{`[0.1, -2.5e-3 ,1E+2,0]`, `[0.1,-2.5e-3,1E+2,0]`, []float32{0.1, -2.5e-3, 100, 0}},
		{`[-0.0230560302734375,0.039337158203125]`, `[-0.0230560302734375,0.039337158203125]`, []float32{-0.0230560302734375, 0.039337158203125}},
		{"[\n  1.00000001\n]", `[1.00000001]`, []float32{1}},
		{`[]`, `[]`, []float32{}},
	}
	for _, tt := range tests {
		req := &api.EmbeddingsRequest{Model: "m", Texts: []string{"a"}}
		out, err := req.Response([]json.RawMessage{json.RawMessage(tt.vector)}, translate.Usage{PromptTokens: 2, TotalTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":` + tt.float + `}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`
		if string(out) != want {
			t.Errorf("float:\ngot  %s\nwant %s", out, want)
		}
		spec.ValidateT(t, "CreateEmbeddingResponse", out)
		req.Base64 = true
		out, err = req.Response([]json.RawMessage{json.RawMessage(tt.vector)}, translate.Usage{})
		if err != nil {
			t.Fatal(err)
		}
		if got := vectorsOf(t, out)[0]; fmt.Sprint(got) != fmt.Sprint(tt.b64Floats) {
			t.Errorf("base64 of %s holds %v", tt.vector, got)
		}
	}
	for _, bad := range []string{`[`, `[1,]`, `[,1]`, `[1 2]`, `["1"]`, `[01]`, `[1.]`, `[.5]`, `[1e]`, `[-]`, `[1]x`, `{}`, `[NaN]`, `[1e39]`, `[[1]]`} {
		req := &api.EmbeddingsRequest{Texts: []string{"a"}, Base64: true}
		if _, err := req.Response([]json.RawMessage{json.RawMessage(bad)}, translate.Usage{}); err == nil {
			t.Errorf("base64 of %s: no error", bad)
		}
		if bad == `[1e39]` { // a JSON number, passed as written when floats are asked for
			continue
		}
		req.Base64 = false
		if _, err := req.Response([]json.RawMessage{json.RawMessage(bad)}, translate.Usage{}); err == nil {
			t.Errorf("float of %s: no error", bad)
		}
	}
	req := &api.EmbeddingsRequest{Texts: []string{"a", "b"}}
	if _, err := req.Response([]json.RawMessage{json.RawMessage(`[1]`)}, translate.Usage{}); err == nil {
		t.Error("one vector for two inputs: no error")
	}
}

func TestEstimateEmbeddingTokens(t *testing.T) {
	if got := api.EstimateEmbeddingTokens([]string{"a", "abcd", "abcde", "héllo wörld"}); got != 1+1+2+3 {
		t.Errorf("got %d", got)
	}
}

func FuzzParseEmbeddingsRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m","input":"hi"}`, `{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":3}`,
		`{"model":"m","input":[1,2]}`, `{"model":"m","input":[[1],[2,3]]}`, `{"model":"m","input":["",1]}`, `{"input":[[]]}`, `{"model":"m","input":[-1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := api.ParseEmbeddingsRequest(body)
		if err != nil {
			var re *api.RequestError
			if !errors.As(err, &re) || re.Message == "" {
				t.Fatalf("error %v is not a RequestError", err)
			}
			return
		}
		if r.Model == "" || r.Tokens == (len(r.Texts) > 0) || len(r.Texts) > api.MaxEmbeddingInputs || r.Dimensions < 0 {
			t.Fatalf("accepted %s as %+v", body, r)
		}
		for _, s := range r.Texts {
			if s == "" {
				t.Fatalf("accepted an empty input: %s", body)
			}
		}
		for _, p := range []string{"openai", "mistral", "vllm"} {
			newTr := NewEmbeddings
			if p != "openai" {
				newTr = NewCompatibleEmbeddings(CompatibleProviders()[p])
			}
			up, err := newTr(translate.Target{Model: "mistral-embed"}, r).RequestBody()
			var re *api.RequestError
			if err != nil && !errors.As(err, &re) || err == nil && !json.Valid(up.Body) {
				t.Fatalf("%s: %v %s", p, err, up.Body)
			}
		}
	})
}

func BenchmarkEmbeddingsFloatToBase64(b *testing.B) {
	vector := make([]float32, 1536)
	for i := range vector {
		vector[i] = float32(math.Sin(float64(i))) / 20
	}
	resp, _ := json.Marshal(map[string]any{"object": "list", "model": "m", "usage": map[string]int{"prompt_tokens": 5, "total_tokens": 5},
		"data": []any{map[string]any{"object": "embedding", "index": 0, "embedding": vector}}})
	req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":"hi","encoding_format":"base64"}`))
	if err != nil {
		b.Fatal(err)
	}
	newTr := NewCompatibleEmbeddings(CompatibleProviders()["vllm"])
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		tr := newTr(translate.Target{Model: "m"}, req)
		tr.ResponseHeaders(200, "application/json")
		if _, err := tr.ResponseBody(resp, true); err != nil {
			b.Fatal(err)
		}
	}
}

// A compatible server that reports no usage gets the token ids counted,
// or text estimated, and the response carries that usage.
func TestEmbeddingsUsageWithoutCounts(t *testing.T) {
	for body, want := range map[string]int64{
		`{"model":"m","input":[[1,2,3],[4]]}`: 4,
		`{"model":"m","input":[5,6]}`:         2,
		`{"model":"m","input":"abcdefgh"}`:    2,
	} {
		req, err := api.ParseEmbeddingsRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		tr := NewCompatibleEmbeddings(CompatibleProviders()["ollama"])(translate.Target{Model: "m"}, req)
		tr.ResponseHeaders(200, "application/json")
		out, err := tr.ResponseBody([]byte(`{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":[1]}],"usage":{"prompt_tokens":0,"total_tokens":0}}`), true)
		if err != nil {
			t.Fatal(err)
		}
		if u := tr.Usage(); u.PromptTokens != want || u.TotalTokens != want || !strings.Contains(string(out), fmt.Sprintf(`"prompt_tokens":%d,`, want)) {
			t.Errorf("%s: usage %+v, body %s", body, u, out)
		}
	}
}
