package replay

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// imageRoutes registers the mock's images endpoints: mux routes for paths of
// their own, s.methods entries for operations on shared routes.
//
// Only one image exchange was recorded: OpenAI answering with a URL
// (openai/images/image-generation-basic), which the mock replays for url
// answers of OpenAI and of Azure OpenAI (whose wire format is OpenAI's).
// Everything else — b64_json answers, Imagen's predictions, Bedrock's
// images — was never recorded, so the mock builds the provider's
// documented response shape around images it draws itself: small,
// deterministic PNGs (or JPEGs when asked) of the requested size, as many
// as requested. None of that is recorded traffic.
func (s *Server) imageRoutes() {
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/v1/images/generations", s.openaiImages)
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/openai/deployments/{deployment}/images/generations", azureDeployment(s.openaiImages))
	s.methods["gemini:predict"] = append(s.methods["gemini:predict"], imagenPredict)
	s.methods["vertex:predict"] = append(s.methods["vertex:predict"], imagenPredict)
	s.methods["bedrock:invoke"] = append(s.methods["bedrock:invoke"], amazonImages)
}

const recordedImages = "openai/images/image-generation-basic.bodies"

// openaiImages answers CreateImageRequest: url answers replay the
// recording, b64_json answers are drawn.
func (s *Server) openaiImages(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req struct {
		Model          string `json:"model"`
		Prompt         string `json:"prompt"`
		N              int    `json:"n"`
		Size           string `json:"size"`
		ResponseFormat string `json:"response_format"`
	}
	if json.Unmarshal(body, &req) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	n := max(req.N, 1)
	if req.ResponseFormat != "b64_json" {
		rec, err := s.load(recordedImages)
		if err == nil && n > 1 {
			rec.body, err = repeatImages(rec.body, n)
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
			return
		}
		s.replay(w, rec)
		return
	}
	width, height, ok := mockSize(req.Size)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "Invalid size "+req.Size)
		return
	}
	img, err := mockImage(width, height, "image/png", 0)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	type item struct {
		B64JSON       string `json:"b64_json"`
		RevisedPrompt string `json:"revised_prompt,omitempty"`
	}
	out := struct {
		Created int64  `json:"created"`
		Data    []item `json:"data"`
	}{Created: time.Now().Unix()}
	for range n {
		it := item{B64JSON: img}
		if strings.HasPrefix(req.Model, "dall-e-3") { // dall-e-3 always says how it rewrote the prompt
			it.RevisedPrompt = req.Prompt
		}
		out.Data = append(out.Data, it)
	}
	writeImagesJSON(w, out)
}

// repeatImages makes the recorded answer carry n images: the recorded one,
// repeated (derived, not recorded).
func repeatImages(body []byte, n int) ([]byte, error) {
	var resp map[string]json.RawMessage
	var data []json.RawMessage
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(resp["data"], &data); err != nil || len(data) == 0 {
		return nil, fmt.Errorf("the recorded images answer has no data")
	}
	for len(data) < n {
		data = append(data, data[0])
	}
	resp["data"], _ = json.Marshal(data)
	return json.Marshal(resp)
}

// imagenSizes are the pixels Imagen makes for an aspect ratio at its 1K
// resolution (2K doubles them).
var imagenSizes = map[string][2]int{"1:1": {1024, 1024}, "3:4": {896, 1280}, "4:3": {1280, 896}, "9:16": {768, 1408}, "16:9": {1408, 768}}

// imagenPredict answers Imagen's predict (Gemini API and Vertex AI) in its
// documented shape. Requests that are not image generation (an embeddings
// predict has instances of content, not prompt) are left to others. The
// model mock-filtered answers as if the safety filter removed every image.
func imagenPredict(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var req struct {
		Instances []struct {
			Prompt *string `json:"prompt"`
		} `json:"instances"`
		Parameters struct {
			SampleCount     int    `json:"sampleCount"`
			AspectRatio     string `json:"aspectRatio"`
			SampleImageSize string `json:"sampleImageSize"`
			OutputOptions   struct {
				MimeType           string `json:"mimeType"`
				CompressionQuality int    `json:"compressionQuality"`
			} `json:"outputOptions"`
		} `json:"parameters"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Instances) == 0 || req.Instances[0].Prompt == nil {
		return false
	}
	p := req.Parameters
	dims, ok := imagenSizes[cmp.Or(p.AspectRatio, "1:1")]
	if !ok || p.SampleCount > 4 {
		writeImagenError(w, "Unsupported aspectRatio or sampleCount.")
		return true
	}
	if p.SampleImageSize == "2K" {
		dims[0], dims[1] = dims[0]*2, dims[1]*2
	}
	mimeType := cmp.Or(p.OutputOptions.MimeType, "image/png")
	type prediction struct {
		MimeType           string `json:"mimeType,omitempty"`
		BytesBase64Encoded string `json:"bytesBase64Encoded,omitempty"`
		RaiFilteredReason  string `json:"raiFilteredReason,omitempty"`
	}
	var out struct {
		Predictions []prediction `json:"predictions,omitempty"`
	}
	model, _, _ := strings.Cut(r.PathValue("call"), ":")
	for range max(p.SampleCount, 1) {
		if model == "mock-filtered" {
			out.Predictions = append(out.Predictions, prediction{RaiFilteredReason: "The image was filtered by the mock's safety filter."})
			continue
		}
		img, err := mockImage(dims[0], dims[1], mimeType, p.OutputOptions.CompressionQuality)
		if err != nil {
			writeImagenError(w, err.Error())
			return true
		}
		out.Predictions = append(out.Predictions, prediction{MimeType: mimeType, BytesBase64Encoded: img})
	}
	writeImagesJSON(w, out)
	return true
}

func writeImagenError(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 400, "message": msg, "status": "INVALID_ARGUMENT"}}) //nolint:errcheck // the client went away
}

// amazonImages answers InvokeModel with a TEXT_IMAGE task (Nova Canvas and
// Titan Image Generator) in the documented shape; other InvokeModel bodies
// are left to others.
func amazonImages(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var req struct {
		TaskType              string `json:"taskType"`
		ImageGenerationConfig struct {
			NumberOfImages int `json:"numberOfImages"`
			Width          int `json:"width"`
			Height         int `json:"height"`
		} `json:"imageGenerationConfig"`
	}
	if json.Unmarshal(body, &req) != nil || req.TaskType != "TEXT_IMAGE" {
		return false
	}
	c := req.ImageGenerationConfig
	width, height := cmp.Or(c.Width, 1024), cmp.Or(c.Height, 1024)
	if width > 4096 || height > 4096 || c.NumberOfImages > 5 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", "ValidationException")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"message": "Invalid image size or number of images."}) //nolint:errcheck // the client went away
		return true
	}
	img, err := mockImage(width, height, "image/png", 0)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return true
	}
	out := struct {
		Images []string `json:"images"`
	}{}
	for range max(c.NumberOfImages, 1) {
		out.Images = append(out.Images, img)
	}
	writeImagesJSON(w, out)
	return true
}

// mockSize reads an OpenAI size; absent and auto are 1024x1024.
func mockSize(size string) (w, h int, ok bool) {
	if size == "" || size == "auto" {
		return 1024, 1024, true
	}
	ws, hs, _ := strings.Cut(size, "x")
	w, errW := strconv.Atoi(ws)
	h, errH := strconv.Atoi(hs)
	return w, h, errW == nil && errH == nil && w > 0 && h > 0 && w <= 4096 && h <= 4096
}

// mockImages caches drawn images by size, type and quality: drawing a 2K
// image takes a while and every answer of that shape is the same. Sizes
// are the client's to choose, so it keeps at most maxMockImages of them;
// others are drawn each time.
var mockImages struct {
	sync.Mutex
	m map[string]string
}

const maxMockImages = 32

// mockImage draws a deterministic image, diagonal stripes in two colors,
// and returns it base64-encoded.
func mockImage(width, height int, mimeType string, quality int) (string, error) {
	key := fmt.Sprintf("%dx%d %s %d", width, height, mimeType, quality)
	mockImages.Lock()
	v, ok := mockImages.m[key]
	mockImages.Unlock()
	if ok {
		return v, nil
	}
	img := image.NewPaletted(image.Rect(0, 0, width, height), color.Palette{color.RGBA{240, 240, 235, 255}, color.RGBA{40, 90, 160, 255}})
	for y := range height {
		for x := range width {
			if (x+y)/32%2 == 0 {
				img.Pix[y*img.Stride+x] = 1
			}
		}
	}
	var b bytes.Buffer
	var err error
	switch mimeType {
	case "image/png":
		err = (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&b, img)
	case "image/jpeg":
		err = jpeg.Encode(&b, img, &jpeg.Options{Quality: cmp.Or(quality, 75)})
	default:
		err = fmt.Errorf("the mock draws image/png and image/jpeg, not %s", mimeType)
	}
	if err != nil {
		return "", err
	}
	s := base64.StdEncoding.EncodeToString(b.Bytes())
	mockImages.Lock()
	if mockImages.m == nil {
		mockImages.m = map[string]string{}
	}
	if len(mockImages.m) < maxMockImages {
		mockImages.m[key] = s
	}
	mockImages.Unlock()
	return s, nil
}

func writeImagesJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b) //nolint:errcheck // the client went away
}
