package gemini

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
)

// images translates image generation to Imagen's predict method. Vertex AI
// takes the same body and answers the same way; its translator wraps this
// one for the path and credential.
type images struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.ImagesRequest
	now              func() time.Time
	status           int
	usage            translate.Usage
}

// NewImages returns the image generation translator for provider gemini:
// Imagen models through POST /v1beta/models/{model}:predict.
func NewImages(t translate.Target, req *api.ImagesRequest) translate.Translator {
	return &images{target: t, req: req, now: time.Now}
}

// maxImagenSamples is Imagen's sampleCount limit.
const maxImagenSamples = 4

type imagenRequest struct {
	Instances  []imagenInstance `json:"instances"`
	Parameters imagenParameters `json:"parameters"`
}

type imagenInstance struct {
	Prompt string `json:"prompt"`
}

type imagenParameters struct {
	SampleCount     int    `json:"sampleCount"`
	AspectRatio     string `json:"aspectRatio,omitempty"`
	SampleImageSize string `json:"sampleImageSize,omitempty"`
	// IncludeRaiReason makes a filtered image come back as its reason
	// instead of silently missing, for a clear error.
	IncludeRaiReason bool                 `json:"includeRaiReason"`
	OutputOptions    *imagenOutputOptions `json:"outputOptions,omitempty"`
}

type imagenOutputOptions struct {
	MimeType           string `json:"mimeType"`
	CompressionQuality *int   `json:"compressionQuality,omitempty"`
}

// RequestBody builds the predict request. quality and moderation have no
// Imagen counterpart and are ignored (quality defaults to auto, and the
// resolution a client wants is in size); style, webp output and
// transparent backgrounds are refused.
func (im *images) RequestBody() (translate.Upstream, error) {
	p, err := imagenParams(im.target.Model, im.req)
	if err != nil {
		return translate.Upstream{}, err
	}
	body, err := json.Marshal(imagenRequest{Instances: []imagenInstance{{Prompt: im.req.Prompt}}, Parameters: p})
	if err != nil {
		return translate.Upstream{}, err
	}
	return upstream(im.target, ":predict", body), nil
}

func imagenParams(model string, r *api.ImagesRequest) (imagenParameters, error) {
	p := imagenParameters{SampleCount: r.N, IncludeRaiReason: true}
	if r.N > maxImagenSamples {
		return p, api.ImageCountError(model, r.N, maxImagenSamples)
	}
	if r.Size != "" && r.Size != "auto" {
		var ok bool
		if p.AspectRatio, p.SampleImageSize, ok = imagenAspect(r.Size); !ok {
			return p, api.ImageSizeError(model, r.Size, imagenSizes)
		}
	}
	switch {
	case r.Style != "":
		return p, api.ImageParamError("style", r.Style, model)
	case r.Background == "transparent":
		return p, api.ImageParamError("background", r.Background, model)
	case r.OutputFormat == "webp":
		return p, api.ImageParamError("output_format", r.OutputFormat, model)
	case r.OutputFormat == "jpeg":
		p.OutputOptions = &imagenOutputOptions{MimeType: "image/jpeg", CompressionQuality: r.OutputCompression}
	case r.OutputFormat == "png":
		p.OutputOptions = &imagenOutputOptions{MimeType: "image/png"}
	}
	return p, nil
}

// imagenRatios are the aspect ratios Imagen makes, with the pixel sizes it
// makes them in at its 1K and 2K resolutions.
var imagenRatios = []struct {
	ratio          string
	w, h           int
	size1K, size2K string
}{
	{"1:1", 1, 1, "1024x1024", "2048x2048"},
	{"3:4", 3, 4, "896x1280", "1792x2560"},
	{"4:3", 4, 3, "1280x896", "2560x1792"},
	{"9:16", 9, 16, "768x1408", "1536x2816"},
	{"16:9", 16, 9, "1408x768", "2816x1536"},
}

// imagenSizes lists, for errors, the sizes that name each ratio.
var imagenSizes = []string{"auto", "1024x1024", "1792x1024", "1024x1792", "1280x896", "896x1280", "1408x768", "768x1408",
	"2048x2048", "2560x1792", "1792x2560", "2816x1536", "1536x2816"}

// imagenAspect maps an OpenAI size to an Imagen aspect ratio. Imagen picks
// the pixels for a ratio, so a size names the ratio it has within 2%
// (dall-e-3's 1792x1024 is 16:9, 512x512 is 1:1) or is one of Imagen's own
// sizes; sizes of its 2K resolution also ask for sampleImageSize 2K.
// Sizes of other shapes, such as 1536x1024 (3:2), are refused.
func imagenAspect(size string) (ratio, sampleImageSize string, ok bool) {
	w, h, ok := api.ParseImageSize(size)
	if !ok {
		return "", "", false
	}
	for _, r := range imagenRatios {
		switch {
		case size == r.size2K:
			return r.ratio, "2K", true
		case size == r.size1K || math.Abs(float64(w*r.h)/float64(h*r.w)-1) <= 0.02:
			return r.ratio, "", true
		}
	}
	return "", "", false
}

// ResponseHeaders keeps a success and maps a refused credential to 502.
func (im *images) ResponseHeaders(status int, contentType string) translate.Head {
	im.status = status
	return translate.Head{Status: api.ClientStatus(status), ContentType: "application/json"}
}

type imagenResponse struct {
	Predictions []struct {
		BytesBase64Encoded string `json:"bytesBase64Encoded"`
		MimeType           string `json:"mimeType"`
		// Prompt is the rewritten prompt when Imagen enhanced it.
		Prompt            string `json:"prompt"`
		RaiFilteredReason string `json:"raiFilteredReason"`
	} `json:"predictions"`
}

// ResponseBody turns predictions into an ImagesResponse. When safety
// filters removed every image (Imagen then answers {} or predictions
// without bytes), the answer is OpenAI's content_policy_violation, not an
// empty list. A body that is no prediction response (not a JSON object,
// predictions that are not objects) is an error wrapping
// translate.ErrUpstream.
func (im *images) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if im.status/100 != 2 {
		return imagenError(im.status, chunk), nil
	}
	small, lifted := api.LiftBase64(chunk)
	var r imagenResponse
	if err := api.DecodeUpstream(small, &r, "Imagen prediction response"); err != nil {
		return nil, err
	}
	var shape struct {
		Predictions json.RawMessage `json:"predictions"`
	}
	json.Unmarshal(small, &shape) //nolint:errcheck // decoded above
	if r.Predictions != nil && !api.ObjectArray(shape.Predictions) {
		return nil, api.Unusable("the provider's predictions are not all objects")
	}
	out := make([]api.GeneratedImage, 0, len(r.Predictions))
	var reasons []string
	format := ""
	for _, p := range r.Predictions {
		if p.BytesBase64Encoded == "" {
			if p.RaiFilteredReason != "" && !slices.Contains(reasons, p.RaiFilteredReason) {
				reasons = append(reasons, p.RaiFilteredReason)
			}
			continue
		}
		if f := api.OutputFormat(p.MimeType); len(out) == 0 || f == format {
			format = f
		} else {
			format = "" // mixed types: let the bytes tell
		}
		out = append(out, api.GeneratedImage{B64: lifted.Value(p.BytesBase64Encoded), RevisedPrompt: p.Prompt})
	}
	if len(out) == 0 {
		msg := "Your request was rejected by the provider's safety system: no image was returned."
		if len(reasons) > 0 {
			msg = "Your request was rejected by the provider's safety system: " + strings.Join(reasons, " ")
		}
		return nil, api.ContentPolicyError(api.Clip(msg, api.MaxErrorMessage))
	}
	body, err := api.MarshalImagesResponse(im.now().Unix(), format, out)
	if err != nil {
		return nil, api.AsUnusable(err)
	}
	im.usage.Images = int64(len(out))
	return body, nil
}

// imagenError is the chat error normalization, except that a prompt
// Imagen's responsible-AI filter refused gets OpenAI's
// content_policy_violation code.
func imagenError(status int, body []byte) []byte {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if status == http.StatusBadRequest && json.Unmarshal(body, &e) == nil && strings.Contains(e.Error.Message, "Responsible AI") {
		code := "content_policy_violation"
		return api.MarshalError(api.ErrorObject{Message: api.ProviderMessage(status, e.Error.Message), Type: "invalid_request_error", Code: &code})
	}
	return errorBody(status, body)
}

// Usage implements translate.Translator: Imagen reports no tokens;
// Images counts the images the client got.
func (im *images) Usage() translate.Usage { return im.usage }

var _ translate.Reporter = (*images)(nil)
