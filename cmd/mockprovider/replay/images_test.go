package replay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/jpeg" // decodes the drawn JPEGs
	_ "image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/azure"
	"modelgate/translate/bedrock"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/vertex"
)

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// decodeImage decodes base64 image bytes and returns the format and size.
func decodeImage(t *testing.T, b64 string) (format string, w, h int) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return format, cfg.Width, cfg.Height
}

func TestOpenAIImages(t *testing.T) {
	_, ts := start(t, Config{})
	rec := recorded(t, "openai/images/image-generation-basic.bodies/00.response.json")
	for _, path := range []string{"/v1/images/generations", "/openai/deployments/dall-e-3/images/generations?api-version=2024-10-21"} {
		status, body := postJSON(t, ts.URL+path, `{"model":"gpt-image-1-mini","prompt":"a cat"}`)
		if status != 200 || !bytes.Equal(body, rec) {
			t.Errorf("%s url answer: %d, not the recording: %s", path, status, body)
		}
		status, body = postJSON(t, ts.URL+path, `{"model":"dall-e-3","prompt":"a cat","size":"1792x1024","response_format":"b64_json"}`)
		var resp struct {
			Data []struct {
				B64JSON       string `json:"b64_json"`
				RevisedPrompt string `json:"revised_prompt"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &resp); status != 200 || err != nil || len(resp.Data) != 1 {
			t.Fatalf("%s b64_json answer: %d %s", path, status, body)
		}
		spec.ValidateT(t, "ImagesResponse", body)
		if f, w, h := decodeImage(t, resp.Data[0].B64JSON); f != "png" || w != 1792 || h != 1024 || resp.Data[0].RevisedPrompt != "a cat" {
			t.Errorf("%s: %s %dx%d, revised_prompt %q", path, f, w, h, resp.Data[0].RevisedPrompt)
		}
	}
	status, body := postJSON(t, ts.URL+"/v1/images/generations", `{"model":"dall-e-2","prompt":"a cat","n":3}`)
	var resp struct{ Data []map[string]string }
	if json.Unmarshal(body, &resp); status != 200 || len(resp.Data) != 3 || resp.Data[2]["url"] == "" {
		t.Errorf("n=3 url answer: %d %s", status, body)
	}
	status, body = postJSON(t, ts.URL+"/v1/images/generations", `{"model":"dall-e-2","prompt":"a cat","n":2,"response_format":"b64_json","size":"256x256"}`)
	if json.Unmarshal(body, &resp); status != 200 || len(resp.Data) != 2 || resp.Data[0]["b64_json"] != resp.Data[1]["b64_json"] {
		t.Errorf("n=2 b64_json answer: %d", status)
	}
	if status, _ := postJSON(t, ts.URL+"/openai/deployments/d/images/generations", `{"prompt":"a cat"}`); status != 404 {
		t.Errorf("Azure without api-version: %d", status)
	}
}

func TestImagenPredict(t *testing.T) {
	_, ts := start(t, Config{})
	for _, path := range []string{"/v1beta/models/imagen-4.0-generate-001:predict",
		"/v1/projects/p/locations/us-central1/publishers/google/models/imagen-4.0-generate-001:predict"} {
		status, body := postJSON(t, ts.URL+path, `{"instances":[{"prompt":"a cat"}],"parameters":{"sampleCount":3,"aspectRatio":"16:9","sampleImageSize":"2K"}}`)
		var resp struct {
			Predictions []struct{ MimeType, BytesBase64Encoded string }
		}
		if err := json.Unmarshal(body, &resp); status != 200 || err != nil || len(resp.Predictions) != 3 {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		if f, w, h := decodeImage(t, resp.Predictions[0].BytesBase64Encoded); f != "png" || w != 2816 || h != 1536 || resp.Predictions[0].MimeType != "image/png" {
			t.Errorf("%s: %s %dx%d", path, f, w, h)
		}
		status, body = postJSON(t, ts.URL+path, `{"instances":[{"prompt":"a cat"}],"parameters":{"sampleCount":1,"outputOptions":{"mimeType":"image/jpeg"}}}`)
		if json.Unmarshal(body, &resp); status != 200 {
			t.Fatalf("%s jpeg: %d %s", path, status, body)
		}
		if f, w, h := decodeImage(t, resp.Predictions[0].BytesBase64Encoded); f != "jpeg" || w != 1024 || h != 1024 {
			t.Errorf("%s jpeg: %s %dx%d", path, f, w, h)
		}
	}
	status, body := postJSON(t, ts.URL+"/v1beta/models/mock-filtered:predict", `{"instances":[{"prompt":"a cat"}],"parameters":{"sampleCount":2}}`)
	if status != 200 || bytes.Contains(body, []byte("bytesBase64Encoded")) || !bytes.Contains(body, []byte("raiFilteredReason")) {
		t.Errorf("mock-filtered: %d %s", status, body)
	}
}

// The image handlers on shared routes answer only image generation.
func TestImageHandlersLeaveOthers(t *testing.T) {
	for name, h := range map[string]func(http.ResponseWriter, *http.Request, []byte) bool{"imagen": imagenPredict, "amazon": amazonImages} {
		for _, body := range []string{`{"instances":[{"content":"hello"}]}`, `{"inputText":"hello"}`, `{"texts":["a"],"input_type":"search_document"}`, `not json`} {
			w := httptest.NewRecorder()
			if h(w, httptest.NewRequest("POST", "/", nil), []byte(body)) || w.Body.Len() > 0 {
				t.Errorf("%s answered %s", name, body)
			}
		}
	}
}

func TestBedrockImages(t *testing.T) {
	_, ts := start(t, Config{})
	status, body := postJSON(t, ts.URL+"/model/amazon.nova-canvas-v1%3A0/invoke",
		`{"taskType":"TEXT_IMAGE","textToImageParams":{"text":"a cat"},"imageGenerationConfig":{"numberOfImages":2,"width":1024,"height":1536}}`)
	var resp struct{ Images []string }
	if err := json.Unmarshal(body, &resp); status != 200 || err != nil || len(resp.Images) != 2 {
		t.Fatalf("%d %s", status, body)
	}
	if f, w, h := decodeImage(t, resp.Images[1]); f != "png" || w != 1024 || h != 1536 {
		t.Errorf("%s %dx%d", f, w, h)
	}
	if status, _ := postJSON(t, ts.URL+"/model/amazon.nova-canvas-v1%3A0/invoke", `{"taskType":"TEXT_IMAGE","imageGenerationConfig":{"numberOfImages":6}}`); status != 400 {
		t.Errorf("6 images: %d", status)
	}
}

// Each provider's translator, against the mock, ends in a valid
// ImagesResponse whose images are PNGs of the asked shape.
func TestImageTranslatorsAgainstMock(t *testing.T) {
	_, ts := start(t, Config{})
	for _, tc := range []struct {
		name   string
		newTr  func(translate.Target, *api.ImagesRequest) translate.Translator
		model  string
		size   string
		wantWH [2]int
	}{
		{"openai", openai.NewImages, "dall-e-3", "1024x1792", [2]int{1024, 1792}},
		{"azure", azure.NewImages, "dall-e-3", "1792x1024", [2]int{1792, 1024}},
		{"gemini", gemini.NewImages, "imagen-4.0-generate-001", "1792x1024", [2]int{1408, 768}},
		{"vertex", vertex.NewImages, "imagen-4.0-generate-001", "1024x1792", [2]int{768, 1408}},
		{"bedrock", bedrock.NewImages, "amazon.nova-canvas-v1:0", "1536x1024", [2]int{1536, 1024}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := api.ParseImagesRequest([]byte(`{"model":"m","prompt":"a cat","response_format":"b64_json","size":"` + tc.size + `"}`))
			if err != nil {
				t.Fatal(err)
			}
			tr := tc.newTr(translate.Target{Provider: tc.name, Model: tc.model, Project: "p", Region: "us-central1", APIKey: "k"}, req)
			up, err := tr.RequestBody()
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(ts.URL+up.Path, "application/json", bytes.NewReader(up.Body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			head := tr.ResponseHeaders(resp.StatusCode, resp.Header.Get("Content-Type"))
			out, err := tr.ResponseBody(body, true)
			if err != nil || head.Status != 200 {
				t.Fatalf("%d %v: %s", head.Status, err, out)
			}
			spec.ValidateT(t, "ImagesResponse", out)
			var got struct {
				Data []struct {
					B64JSON string `json:"b64_json"`
				}
			}
			json.Unmarshal(out, &got)
			if len(got.Data) != 1 {
				t.Fatalf("body: %.200s", out)
			}
			if f, w, h := decodeImage(t, got.Data[0].B64JSON); f != "png" || [2]int{w, h} != tc.wantWH {
				t.Errorf("%s %dx%d, want png %v", f, w, h, tc.wantWH)
			}
		})
	}
}
