package bedrock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
)

// images translates image generation to InvokeModel with Amazon's image
// request format, which Nova Canvas and Titan Image Generator share.
type images struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.ImagesRequest
	now              func() time.Time
	status           int
	usage            translate.Usage
}

// NewImages returns the image generation translator for provider bedrock:
// Amazon Nova Canvas and Titan Image Generator (v1, v2) through
// POST /model/{id}/invoke, authenticated like chat.
func NewImages(t translate.Target, req *api.ImagesRequest) translate.Translator {
	return &images{target: t, req: req, now: time.Now}
}

type amazonImageRequest struct {
	TaskType              string                `json:"taskType"`
	TextToImageParams     textToImageParams     `json:"textToImageParams"`
	ImageGenerationConfig imageGenerationConfig `json:"imageGenerationConfig"`
}

type textToImageParams struct {
	Text string `json:"text"`
}

type imageGenerationConfig struct {
	NumberOfImages int    `json:"numberOfImages"`
	Width          int    `json:"width,omitempty"`
	Height         int    `json:"height,omitempty"`
	Quality        string `json:"quality,omitempty"`
}

// maxAmazonImages is numberOfImages' limit for Nova Canvas and Titan.
const maxAmazonImages = 5

// amazonQuality maps OpenAI's qualities onto Amazon's two; auto leaves
// the model's default (standard).
var amazonQuality = map[string]string{"standard": "standard", "low": "standard", "medium": "standard",
	"hd": "premium", "high": "premium", "auto": ""}

// titanSizes are the only sizes Titan Image Generator makes.
var titanSizes = []string{"1024x1024", "768x768", "512x512", "768x1152", "384x576", "1152x768", "576x384", "768x1280",
	"384x640", "1280x768", "640x384", "896x1152", "448x576", "1152x896", "576x448", "768x1408", "384x704", "1408x768",
	"704x384", "640x1408", "320x704", "1408x640", "704x320", "1152x640", "1173x640"}

// novaSizes lists, for errors, OpenAI's sizes Nova Canvas makes; it takes
// any size that fits novaSize.
var novaSizes = []string{"auto", "512x512", "1024x1024", "1536x1024", "1024x1536", "1792x1024", "1024x1792"}

// novaSize is Nova Canvas's rule: edges of 320 to 4096 pixels divisible by
// 16, an aspect ratio within 1:4 to 4:1, at most 4,194,304 pixels.
func novaSize(w, h int) bool {
	return w >= 320 && h >= 320 && w <= 4096 && h <= 4096 && w%16 == 0 && h%16 == 0 &&
		w <= 4*h && h <= 4*w && w*h <= 4194304
}

// RequestBody builds the TEXT_IMAGE request. style, formats other than
// PNG and transparent backgrounds have no counterpart and are refused;
// moderation is ignored.
func (im *images) RequestBody() (translate.Upstream, error) {
	cfg, err := amazonImageConfig(im.target.Model, im.req)
	if err != nil {
		return translate.Upstream{}, err
	}
	body, err := json.Marshal(amazonImageRequest{TaskType: "TEXT_IMAGE", TextToImageParams: textToImageParams{Text: im.req.Prompt},
		ImageGenerationConfig: cfg})
	if err != nil {
		return translate.Upstream{}, err
	}
	return upstream(im.target, "invoke", body, im.now()), nil
}

func amazonImageConfig(model string, r *api.ImagesRequest) (imageGenerationConfig, error) {
	cfg := imageGenerationConfig{NumberOfImages: r.N}
	titan := strings.Contains(model, "titan-image-generator")
	if !titan && !strings.Contains(model, "nova-canvas") && !strings.HasPrefix(model, "arn:") {
		return cfg, &api.RequestError{Param: "model", Code: "invalid_value", Message: fmt.Sprintf(
			"The Bedrock model '%s' is not an Amazon Nova Canvas or Titan Image Generator model, the image models the gateway translates for Bedrock.", model)}
	}
	if r.N > maxAmazonImages {
		return cfg, api.ImageCountError(model, r.N, maxAmazonImages)
	}
	if r.Size != "" && r.Size != "auto" {
		w, h, _ := api.ParseImageSize(r.Size)
		switch {
		case titan && !slices.Contains(titanSizes, r.Size):
			return cfg, api.ImageSizeError(model, r.Size, append([]string{"auto"}, titanSizes...))
		case !titan && !novaSize(w, h):
			return cfg, api.ImageSizeError(model, r.Size, novaSizes)
		}
		cfg.Width, cfg.Height = w, h
	}
	cfg.Quality = amazonQuality[r.Quality]
	switch {
	case r.Style != "":
		return cfg, api.ImageParamError("style", r.Style, model)
	case r.OutputFormat != "" && r.OutputFormat != "png":
		return cfg, api.ImageParamError("output_format", r.OutputFormat, model)
	case r.Background == "transparent":
		return cfg, api.ImageParamError("background", r.Background, model)
	}
	return cfg, nil
}

// ResponseHeaders keeps a success and maps errors as chat does.
func (im *images) ResponseHeaders(status int, contentType string) translate.Head {
	im.status = status
	return translate.Head{Status: clientStatus(status), ContentType: "application/json"}
}

// ResponseBody turns images[] into an ImagesResponse. Amazon documents
// PNG output but the response does not say, so output_format is left out
// and the bytes tell. No image, with or without Amazon's error, is a
// refusal (content_policy_violation); a body that is no image response
// (not a JSON object, neither images nor error, images that are not
// strings) is an error wrapping translate.ErrUpstream.
func (im *images) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if im.status/100 != 2 {
		return amazonImageError(im.status, chunk), nil
	}
	var r struct {
		Images []*string `json:"images"`
		Error  *string   `json:"error"`
	}
	small, lifted := api.LiftBase64(chunk)
	if err := api.DecodeUpstream(small, &r, "image generation response"); err != nil {
		return nil, err
	}
	if r.Images == nil && r.Error == nil {
		return nil, api.Unusable("the provider's image generation response has neither images nor an error")
	}
	out := make([]api.GeneratedImage, 0, len(r.Images))
	for _, b64 := range r.Images {
		if b64 == nil {
			return nil, api.Unusable("the provider's images are not all strings")
		}
		if *b64 != "" {
			out = append(out, api.GeneratedImage{B64: lifted.Value(*b64)})
		}
	}
	if len(out) == 0 {
		msg := "Your request was rejected by the provider's safety system: no image was returned."
		if r.Error != nil && strings.TrimSpace(*r.Error) != "" {
			msg = "Your request was rejected by the provider: " + *r.Error
		}
		return nil, api.ContentPolicyError(api.Clip(msg, api.MaxErrorMessage))
	}
	body, err := api.MarshalImagesResponse(im.now().Unix(), "", out)
	if err != nil {
		return nil, api.AsUnusable(err)
	}
	im.usage.Images = int64(len(out))
	return body, nil
}

// amazonImageError is chat's error normalization, except that a request
// Amazon's content filters blocked gets OpenAI's content_policy_violation.
func amazonImageError(status int, body []byte) []byte {
	var e struct {
		Message string `json:"message"`
	}
	if status == http.StatusBadRequest && json.Unmarshal(body, &e) == nil && strings.Contains(strings.ToLower(e.Message), "content filter") {
		code := "content_policy_violation"
		return api.MarshalError(api.ErrorObject{Message: api.ProviderMessage(status, e.Message), Type: "invalid_request_error", Code: &code})
	}
	return errorBody(status, body)
}

// Usage implements translate.Translator: Bedrock reports no image tokens;
// Images counts the images the client got.
func (im *images) Usage() translate.Usage { return im.usage }

var _ translate.Reporter = (*images)(nil)
