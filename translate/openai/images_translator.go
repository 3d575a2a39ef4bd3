package openai

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
)

// images passes image generation through to an OpenAI-format backend.
type images struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.ImagesRequest
	now              func() time.Time
	status           int
	usage            translate.Usage
}

// NewImages returns the image generation translator for provider openai
// (and, wrapped, azure). The request is checked against what the upstream
// model's family accepts (see imageRules); a model the gateway does not
// know passes as sent.
func NewImages(t translate.Target, req *api.ImagesRequest) translate.Translator {
	return &images{target: t, req: req, now: time.Now}
}

// RequestBody replaces the model and applies the model family's rules.
func (im *images) RequestBody() (translate.Upstream, error) {
	members := make(map[string]json.RawMessage, len(im.req.Members)+1)
	for k, v := range im.req.Members {
		if !jsonscan.IsNull(v) {
			members[k] = v
		}
	}
	model, err := json.Marshal(im.target.Model)
	if err != nil {
		return translate.Upstream{}, err
	}
	members["model"] = model
	if rules, ok := imageRules(im.target.Model); ok {
		if err := rules.apply(im.target.Model, im.req, members); err != nil {
			return translate.Upstream{}, err
		}
	}
	body, err := json.Marshal(members)
	if err != nil {
		return translate.Upstream{}, fmt.Errorf("encoding upstream request: %w", err)
	}
	return upstream(im.target, "/v1/images/generations", "application/json", body), nil
}

// imageFamily is what the gateway knows about an OpenAI image model.
type imageFamily struct {
	maxN  int
	sizes []string // nil: any WIDTHxHEIGHT the size check accepts
	// sizeCheck vets a size outside sizes (gpt-image-2's arbitrary
	// resolutions); nil rejects it.
	sizeCheck func(w, h int) bool
	// quality maps the client's quality to the model's; "" drops it, a
	// value missing from the map is refused.
	quality map[string]string
	style   bool
	// base64Only models always answer with b64_json and refuse
	// response_format.
	base64Only bool
}

var (
	dallE2 = imageFamily{maxN: 10, sizes: []string{"256x256", "512x512", "1024x1024"},
		quality: map[string]string{"standard": "standard", "auto": "", "low": "standard", "medium": "standard"}}
	dallE3 = imageFamily{maxN: 1, sizes: []string{"1024x1024", "1792x1024", "1024x1792"}, style: true,
		quality: map[string]string{"standard": "standard", "hd": "hd", "auto": "", "low": "standard", "medium": "standard", "high": "hd"}}
	gptImageQuality = map[string]string{"low": "low", "medium": "medium", "high": "high", "auto": "auto", "standard": "medium", "hd": "high"}
	gptImage        = imageFamily{maxN: 10, sizes: []string{"auto", "1024x1024", "1536x1024", "1024x1536"},
		quality: gptImageQuality, base64Only: true}
	// gptImage2 takes any resolution with both edges divisible by 16 and
	// an aspect ratio within 1:3 to 3:1; the pixel limits are OpenAI's to
	// enforce.
	gptImage2 = imageFamily{maxN: 10, sizes: gptImage.sizes, quality: gptImageQuality, base64Only: true,
		sizeCheck: func(w, h int) bool { return w%16 == 0 && h%16 == 0 && w <= 3*h && h <= 3*w }}
)

// imageRules finds the model's family by its name.
func imageRules(model string) (imageFamily, bool) {
	switch m := strings.ToLower(model); {
	case strings.HasPrefix(m, "dall-e-2"):
		return dallE2, true
	case strings.HasPrefix(m, "dall-e-3"):
		return dallE3, true
	case strings.HasPrefix(m, "gpt-image-2"):
		return gptImage2, true
	case strings.HasPrefix(m, "gpt-image"):
		return gptImage, true
	}
	return imageFamily{}, false
}

// apply checks the request against the family and rewrites members:
// "auto" sizes and qualities the DALL·E models do not take are dropped,
// the DALL·E and GPT image quality names map onto each other, and
// response_format is sent only to models that accept it.
func (f imageFamily) apply(model string, r *api.ImagesRequest, members map[string]json.RawMessage) error {
	if r.N > f.maxN {
		return api.ImageCountError(model, r.N, f.maxN)
	}
	switch w, h, _ := api.ParseImageSize(r.Size); {
	case r.Size == "":
	case r.Size == "auto" && !slices.Contains(f.sizes, "auto"):
		delete(members, "size")
	case slices.Contains(f.sizes, r.Size):
	case f.sizeCheck != nil && r.Size != "auto" && f.sizeCheck(w, h):
	default:
		return api.ImageSizeError(model, r.Size, f.sizes)
	}
	if r.Quality != "" {
		q, ok := f.quality[r.Quality]
		switch {
		case !ok:
			return api.ImageParamError("quality", r.Quality, model)
		case q == "":
			delete(members, "quality")
		default:
			members["quality"], _ = json.Marshal(q)
		}
	}
	if r.Style != "" && !f.style {
		return api.ImageParamError("style", r.Style, model)
	}
	if f.base64Only {
		delete(members, "response_format")
	} else {
		members["response_format"], _ = json.Marshal(r.ResponseFormat)
	}
	return nil
}

// ResponseHeaders keeps a success and maps an error status.
func (im *images) ResponseHeaders(status int, contentType string) translate.Head {
	im.status = status
	return translate.Head{Status: api.ClientStatus(status), ContentType: "application/json"}
}

// ResponseBody normalizes the ImagesResponse or the error. Usage counts
// the images of a normalized answer (its data items) besides its tokens.
func (im *images) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if im.status/100 != 2 {
		return api.ProviderError(im.status, chunk), nil
	}
	out, usage, err := normalizeImagesResponse(chunk, im.now)
	im.usage = usage
	return out, api.AsUnusable(err)
}

// Usage implements translate.Translator.
func (im *images) Usage() translate.Usage { return im.usage }

var errNotImagesResponse = api.Unusable("the provider's response is not an ImagesResponse with a data array of objects")

// imagesEnums are the ImagesResponse members the schema restricts to
// values; anything else a backend sends there is dropped.
var imagesEnums = map[string][]string{
	"background":    {"transparent", "opaque"},
	"output_format": {"png", "webp", "jpeg"},
	"size":          {"1024x1024", "1024x1536", "1536x1024"},
	"quality":       {"low", "medium", "high"},
}

// normalizeImagesResponse makes an OpenAI-format answer schema-valid: nulls
// go (the schema types no member as nullable), as do enum members with
// values the schema lacks and usage not in ImageGenUsage's shape (after
// it was counted); a missing created is set. An answer without a data
// array of objects is an error wrapping translate.ErrUpstream: the schema
// would allow it, but no image generation answers so. The usage returned
// counts the answer's images (the items of data) once it is normalized.
func normalizeImagesResponse(body []byte, now func() time.Time) ([]byte, translate.Usage, error) {
	small, lifted := api.LiftBase64(body)
	var members map[string]json.RawMessage
	if err := api.DecodeUpstream(small, &members, "images response"); err != nil {
		return nil, translate.Usage{}, err
	}
	for k, v := range members {
		var s string
		if allowed, ok := imagesEnums[k]; jsonscan.IsNull(v) || ok && (json.Unmarshal(v, &s) != nil || !slices.Contains(allowed, s)) {
			delete(members, k)
		}
	}
	var created int64
	if json.Unmarshal(members["created"], &created) != nil {
		members["created"], _ = json.Marshal(now().Unix())
	}
	var usage translate.Usage
	if raw, ok := members["usage"]; ok {
		var valid bool
		usage, valid = imageUsage(raw)
		if !valid {
			delete(members, "usage")
		}
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(members["data"], &items); err != nil || items == nil {
		return nil, usage, errNotImagesResponse
	}
	for _, it := range items {
		if it == nil {
			return nil, usage, errNotImagesResponse
		}
		for k, v := range it {
			if jsonscan.IsNull(v) {
				delete(it, k)
			}
		}
	}
	var err error
	if members["data"], err = api.Marshal(items); err != nil {
		return nil, usage, err
	}
	out, err := api.Marshal(members)
	if err != nil {
		return nil, usage, err
	}
	usage.Images = int64(len(items))
	return lifted.Restore(out), usage, nil
}

// imageUsage reads ImageGenUsage; valid reports whether it has the
// schema's shape (required members present, details complete).
func imageUsage(raw json.RawMessage) (u translate.Usage, valid bool) {
	type details struct {
		TextTokens  *int64 `json:"text_tokens"`
		ImageTokens *int64 `json:"image_tokens"`
	}
	var in struct {
		InputTokens         *int64   `json:"input_tokens"`
		OutputTokens        *int64   `json:"output_tokens"`
		TotalTokens         *int64   `json:"total_tokens"`
		InputTokensDetails  *details `json:"input_tokens_details"`
		OutputTokensDetails *details `json:"output_tokens_details"`
	}
	if json.Unmarshal(raw, &in) != nil {
		return translate.Usage{}, false
	}
	complete := func(d *details) bool { return d != nil && d.TextTokens != nil && d.ImageTokens != nil }
	valid = in.InputTokens != nil && in.OutputTokens != nil && in.TotalTokens != nil && complete(in.InputTokensDetails) &&
		(in.OutputTokensDetails == nil || complete(in.OutputTokensDetails))
	if in.InputTokens != nil {
		u.PromptTokens = *in.InputTokens
	}
	if in.OutputTokens != nil {
		u.CompletionTokens = *in.OutputTokens
	}
	if in.TotalTokens != nil {
		u.TotalTokens = *in.TotalTokens
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, valid
}

var _ translate.Reporter = (*images)(nil)
