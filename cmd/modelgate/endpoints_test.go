package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"modelgate/translate/api/spec"
)

// embeddingModels are the dev models of every embedding provider, with
// the dimensions each can shorten to.
var embeddingModels = []struct {
	model      string
	dimensions int64
	single     bool // embeds one input per request
}{
	{"text-embedding-3-small", 256, false},
	{"azure-embedding", 0, false},
	{"mistral-embed", 0, false},
	{"gemini-embedding", 256, false},
	{"vertex-embedding", 256, false},
	{"titan-embed", 256, true},
	{"bedrock-cohere-embed", 0, false},
	{"cohere-embed", 256, false},
}

// Embeddings through `modelgate dev` with openai-go for every embedding
// provider: float, base64 (decoded to the same float32 values) and, where
// the model can shorten, dimensions.
func TestDevEmbeddings(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()
	for _, m := range embeddingModels {
		t.Run(m.model, func(t *testing.T) {
			inputs := []string{"The food was delicious.", "The waiter was friendly."}
			if m.single {
				inputs = inputs[:1]
			}
			p := openai.EmbeddingNewParams{Model: m.model, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}}
			floats, err := c.Embeddings.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateEmbeddingResponse", rec.last())
			if len(floats.Data) != len(inputs) || len(floats.Data[0].Embedding) == 0 || floats.Usage.TotalTokens == 0 && !strings.HasPrefix(m.model, "gemini") {
				t.Fatalf("float response: %d embeddings, usage %+v", len(floats.Data), floats.Usage)
			}
			for i, d := range floats.Data {
				if d.Index != int64(i) {
					t.Errorf("embedding %d has index %d", i, d.Index)
				}
			}

			p.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
			b64 := rawEmbeddings(t, c, p)
			// The specification types embedding as a float array only; the
			// rest of the base64 body must still match it.
			spec.ValidateT(t, "CreateEmbeddingResponse", withFloatEmbeddings(t, rec.last(), b64))
			if !strings.HasPrefix(m.model, "text-embedding") { // the OpenAI mock replays different recordings
				if len(b64) != len(floats.Data) || !sameFloat32(b64[0], floats.Data[0].Embedding) {
					t.Errorf("base64 vectors differ from the float ones")
				}
			}

			if m.dimensions > 0 {
				p.EncodingFormat = ""
				p.Dimensions = openai.Int(m.dimensions)
				short, err := c.Embeddings.New(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if got := len(short.Data[0].Embedding); int64(got) != m.dimensions {
					t.Errorf("dimensions %d gave %d", m.dimensions, got)
				}
			}
		})
	}
	t.Run("empty input", func(t *testing.T) {
		_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "gemini-embedding", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" || apiErr.Code != "invalid_value" {
			t.Errorf("error = %v", err)
		}
	})
}

// rawEmbeddings asks for base64 and decodes it as OpenAI documents:
// little-endian float32.
func rawEmbeddings(t *testing.T, c openai.Client, p openai.EmbeddingNewParams) [][]float32 {
	t.Helper()
	var res struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := c.Post(context.Background(), "embeddings", p, &res); err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, d := range res.Data {
		raw, err := base64.StdEncoding.DecodeString(d.Embedding)
		if err != nil || len(raw)%4 != 0 {
			t.Fatalf("embedding %q is not base64 float32: %v", d.Embedding, err)
		}
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		out = append(out, v)
	}
	return out
}

// withFloatEmbeddings puts the decoded vectors in place of the base64
// strings of an embeddings body.
func withFloatEmbeddings(t *testing.T, body []byte, vecs [][]float32) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	data, _ := m["data"].([]any)
	if len(data) != len(vecs) {
		t.Fatalf("%d embeddings, %d decoded", len(data), len(vecs))
	}
	for i, d := range data {
		obj := d.(map[string]any)
		if _, ok := obj["embedding"].(string); !ok {
			t.Fatalf("embedding %d is not a base64 string", i)
		}
		obj["embedding"] = vecs[i]
	}
	out, _ := json.Marshal(m)
	return out
}

func sameFloat32(a []float32, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != float32(b[i]) {
			return false
		}
	}
	return true
}

// The Node SDK asks for base64 unless told otherwise and decodes the
// vectors itself; they must be the float vectors openai-go gets.
func TestNodeSDKBase64Embeddings(t *testing.T) {
	node, dir := nodeSDK(t)
	a := startDev(t, func(string) string { return "" })
	c := client(a, a.APIKey, &recorder{})
	const input = "The food was delicious and the waiter was friendly."
	models := []string{"gemini-embedding", "vertex-embedding", "titan-embed", "cohere-embed", "bedrock-cohere-embed", "mistral-embed"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"embeddings.mjs"}, models...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MODELGATE_BASE_URL="+a.Gateway, "MODELGATE_API_KEY="+a.APIKey, "MODELGATE_INPUT="+input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}
	var got map[string][][]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for _, model := range models {
		want, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: model,
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(input)}, EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat})
		if err != nil {
			t.Fatal(err)
		}
		vecs := got[model]
		if len(vecs) != 1 || len(vecs[0]) != len(want.Data[0].Embedding) || len(vecs[0]) == 0 {
			t.Fatalf("%s: node got %d vectors", model, len(vecs))
		}
		for i, v := range vecs[0] {
			if float32(v) != float32(want.Data[0].Embedding[i]) {
				t.Fatalf("%s: component %d is %v in node, %v as float", model, i, v, want.Data[0].Embedding[i])
			}
		}
	}
}

// Image generation with both response formats, for every image provider;
// a URL the gateway signed is fetched back through the gateway.
func TestDevImages(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()
	for _, model := range []string{"dall-e-3", "azure-dall-e-3", "imagen", "vertex-imagen", "nova-canvas"} {
		t.Run(model, func(t *testing.T) {
			p := openai.ImageGenerateParams{Model: model, Prompt: "A line drawing of a cat", Size: openai.ImageGenerateParamsSize1024x1024,
				ResponseFormat: openai.ImageGenerateParamsResponseFormatB64JSON}
			res, err := c.Images.Generate(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "ImagesResponse", rec.last())
			if len(res.Data) != 1 || res.Data[0].B64JSON == "" {
				t.Fatalf("b64_json response: %s", rec.last())
			}
			png, err := base64.StdEncoding.DecodeString(res.Data[0].B64JSON)
			if err != nil || http.DetectContentType(png) != "image/png" {
				t.Errorf("b64_json is not a PNG: %v", err)
			}

			p.ResponseFormat = openai.ImageGenerateParamsResponseFormatURL
			res, err = c.Images.Generate(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "ImagesResponse", rec.last())
			if len(res.Data) != 1 || res.Data[0].URL == "" {
				t.Fatalf("url response: %s", rec.last())
			}
			if !strings.HasPrefix(res.Data[0].URL, strings.TrimSuffix(a.Gateway, "/v1")+"/modelgate/images/") {
				return // the provider made the URL (the recorded OpenAI answer)
			}
			body, ct := fetch(t, res.Data[0].URL, http.StatusOK)
			if ct != "image/png" || http.DetectContentType(body) != "image/png" {
				t.Errorf("GET %s: %s, %d bytes", res.Data[0].URL, ct, len(body))
			}
			fetch(t, strings.Replace(res.Data[0].URL, "signature=", "signature=x", 1), http.StatusForbidden)
		})
	}
	t.Run("every image filtered", func(t *testing.T) {
		_, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "imagen-filtered", Prompt: "cat"})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "content_policy_violation" {
			t.Errorf("error = %v", err)
		}
	})
	t.Run("unsupported size", func(t *testing.T) {
		_, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "imagen", Prompt: "cat", Size: "123x456"})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "size" || apiErr.Code != "invalid_value" {
			t.Errorf("error = %v", err)
		}
	})
}

func fetch(t *testing.T, url string, want int) ([]byte, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d, want %d: %s", url, resp.StatusCode, want, body)
	}
	return body, resp.Header.Get("Content-Type")
}

// Transcription in all five formats for OpenAI, Azure and Groq, through
// openai-go's multipart upload.
func TestDevTranscriptions(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()
	audio := bytes.Repeat([]byte("RIFF\x24\x08\x00\x00WAVEfmt "), 64)
	for _, model := range []string{"whisper-1", "azure-whisper", "groq-whisper"} {
		for _, format := range []string{"json", "text", "srt", "vtt", "verbose_json"} {
			t.Run(model+"/"+format, func(t *testing.T) {
				p := openai.AudioTranscriptionNewParams{Model: model, File: openai.File(bytes.NewReader(audio), "speech.wav", "audio/wav"),
					ResponseFormat: openai.AudioResponseFormat(format)}
				var raw *http.Response
				var err error
				if strings.HasSuffix(format, "json") {
					_, err = c.Audio.Transcriptions.New(ctx, p, option.WithResponseInto(&raw))
				} else { // as openai-go documents for text, srt and vtt
					var text string
					err = c.Post(ctx, "audio/transcriptions", p, &text, option.WithResponseInto(&raw))
				}
				if err != nil {
					t.Fatal(err)
				}
				body := rec.last()
				ct := raw.Header.Get("Content-Type")
				switch format {
				case "json":
					spec.ValidateT(t, "CreateTranscriptionResponseJson", body)
				case "verbose_json":
					spec.ValidateT(t, "CreateTranscriptionResponseVerboseJson", body)
				case "srt":
					if !bytes.HasPrefix(body, []byte("1\n00:00:00,000 --> ")) {
						t.Errorf("srt body %q", body)
					}
				case "vtt":
					if !bytes.HasPrefix(body, []byte("WEBVTT\n\n00:00:00.000 --> ")) {
						t.Errorf("vtt body %q", body)
					}
				case "text":
					if !strings.HasPrefix(ct, "text/plain") || !bytes.Contains(body, []byte("The sun rises")) {
						t.Errorf("text: %s %q", ct, body)
					}
				}
				if strings.HasSuffix(format, "json") != strings.HasPrefix(ct, "application/json") {
					t.Errorf("content type %q for %s", ct, format)
				}
			})
		}
	}
	t.Run("missing file", func(t *testing.T) {
		status, body := send(t, http.MethodPost, a.Gateway+"/audio/transcriptions", a.APIKey, "multipart/form-data; boundary=b",
			"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b--\r\n")
		if status != 400 || !strings.Contains(string(body), `"param":"file"`) || !strings.Contains(string(body), `"code":"missing_required_parameter"`) {
			t.Errorf("missing file: %d %s", status, body)
		}
	})
	t.Run("too large", func(t *testing.T) {
		big := make([]byte, 25<<20+1)
		_, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{Model: "whisper-1",
			File: openai.File(bytes.NewReader(big), "speech.wav", "audio/wav")})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 413 || apiErr.Type != "invalid_request_error" {
			t.Errorf("error = %v", err)
		}
	})
}

// The error cases of embeddings, images and transcriptions through the
// gateway: exact status, type, param and code.
func TestDevEndpointErrors(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	form := func(parts ...string) string { // name, filename ("" for a field), value
		var b strings.Builder
		for i := 0; i+2 < len(parts); i += 3 {
			b.WriteString("--b\r\nContent-Disposition: form-data; name=\"" + parts[i] + "\"")
			if parts[i+1] != "" {
				b.WriteString("; filename=\"" + parts[i+1] + "\"\r\nContent-Type: application/octet-stream")
			}
			b.WriteString("\r\n\r\n" + parts[i+2] + "\r\n")
		}
		return b.String() + "--b--\r\n"
	}
	const multipart = "multipart/form-data; boundary=b"
	wav := "RIFF\x24\x08\x00\x00WAVEfmt "
	for _, tt := range []struct {
		name, path, contentType, body string
		status                        int
		typ, param, code              string
	}{
		{"embeddings: empty input", "/embeddings", "application/json", `{"model":"cohere-embed","input":""}`, 400, "invalid_request_error", "input", "invalid_value"},
		{"embeddings: empty array", "/embeddings", "application/json", `{"model":"cohere-embed","input":[]}`, 400, "invalid_request_error", "input", "invalid_value"},
		{"embeddings: no model", "/embeddings", "application/json", `{"input":"x"}`, 400, "invalid_request_error", "model", "missing_required_parameter"},
		{"embeddings: bad encoding", "/embeddings", "application/json", `{"model":"cohere-embed","input":"x","encoding_format":"hex"}`, 400, "invalid_request_error", "encoding_format", "invalid_value"},
		{"embeddings: model cannot shorten", "/embeddings", "application/json", `{"model":"mistral-embed","input":"x","dimensions":128}`, 400, "invalid_request_error", "dimensions", "invalid_value"},
		{"embeddings: unknown model", "/embeddings", "application/json", `{"model":"nope","input":"x"}`, 404, "invalid_request_error", "model", "model_not_found"},
		{"embeddings: chat-only provider", "/embeddings", "application/json", `{"model":"claude-sonnet","input":"x"}`, 400, "invalid_request_error", "model", ""},
		{"images: no prompt", "/images/generations", "application/json", `{"model":"imagen"}`, 400, "invalid_request_error", "prompt", "missing_required_parameter"},
		{"images: bad size", "/images/generations", "application/json", `{"model":"imagen","prompt":"cat","size":"123x456"}`, 400, "invalid_request_error", "size", "invalid_value"},
		{"images: bad response_format", "/images/generations", "application/json", `{"model":"imagen","prompt":"cat","response_format":"gif"}`, 400, "invalid_request_error", "response_format", "invalid_value"},
		{"transcription: no file", "/audio/transcriptions", multipart, form("model", "", "whisper-1"), 400, "invalid_request_error", "file", "missing_required_parameter"},
		{"transcription: no model", "/audio/transcriptions", multipart, form("file", "a.wav", wav), 400, "invalid_request_error", "model", "missing_required_parameter"},
		{"transcription: file type", "/audio/transcriptions", multipart, form("model", "", "whisper-1", "file", "notes.txt", "hello"), 415, "invalid_request_error", "file", "unsupported_file_format"},
		{"transcription: JSON body", "/audio/transcriptions", "application/json", `{"model":"whisper-1"}`, 415, "invalid_request_error", "", "unsupported_media_type"},
		{"transcription: bad format", "/audio/transcriptions", multipart, form("model", "", "whisper-1", "file", "a.wav", wav, "response_format", "", "xml"), 400, "invalid_request_error", "response_format", "invalid_value"},
		{"chat: multipart body", "/chat/completions", multipart, form("model", "", "gpt-4o"), 415, "invalid_request_error", "", "unsupported_media_type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := send(t, http.MethodPost, a.Gateway+tt.path, a.APIKey, tt.contentType, tt.body)
			spec.ValidateT(t, "ErrorResponse", body)
			var e struct {
				Error struct {
					Type  string  `json:"type"`
					Param *string `json:"param"`
					Code  *string `json:"code"`
				} `json:"error"`
			}
			json.Unmarshal(body, &e)
			deref := func(s *string) string {
				if s == nil {
					return ""
				}
				return *s
			}
			if status != tt.status || e.Error.Type != tt.typ || deref(e.Error.Param) != tt.param || deref(e.Error.Code) != tt.code {
				t.Errorf("got %d %s, want %d type %s param %q code %q", status, body, tt.status, tt.typ, tt.param, tt.code)
			}
		})
	}
}

// nodeSDK finds node and the official Node SDK installed in
// testdata/nodesdk.
func nodeSDK(t *testing.T) (node, dir string) { return nodePackage(t, "nodesdk", "openai") }

// nodePackage finds node and the npm packages installed in
// testdata/<folder> (pkg, one of them, must be there); without them the
// test skips, unless MODELGATE_TEST_NODE is set (CI), where it fails.
func nodePackage(t *testing.T, folder, pkg string) (node, dir string) {
	t.Helper()
	dir, _ = filepath.Abs(filepath.Join("testdata", folder))
	_, statErr := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
	node, pathErr := exec.LookPath("node")
	if statErr != nil || pathErr != nil {
		if os.Getenv("MODELGATE_TEST_NODE") != "" {
			t.Fatalf("MODELGATE_TEST_NODE is set but node or %s is missing (npm ci in %s): %v %v", pkg, dir, statErr, pathErr)
		}
		t.Skipf("skipping: needs node and `npm ci` in %s", dir)
	}
	return node, dir
}
