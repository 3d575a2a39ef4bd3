package api

import (
	"encoding/json"
	"fmt"
	"modelgate/translate/jsonscan"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ImagesRequest is a validated CreateImageRequest. The members every
// provider acts on are parsed; Members keeps the request as sent for the
// OpenAI wire format.
type ImagesRequest struct {
	Model string
	// ResponseFormat is "url" or "b64_json": what the client asked, or its
	// default. OpenAI defaults to url for the DALL·E models and always
	// answers the GPT image models with base64, so a request without
	// response_format defaults to b64_json when the client's model id
	// starts with gpt-image and to url otherwise. Providers that return
	// bytes get gateway URLs for url.
	ResponseFormat string
	Prompt         string
	// N is the number of images, 1 when absent.
	N int
	// Size is "auto", "<width>x<height>", or empty when absent.
	Size string
	// Quality, Style, OutputFormat, Background and Moderation are the
	// client's values (checked against the specification's enums), empty
	// when absent.
	Quality, Style, OutputFormat, Background, Moderation string
	// OutputCompression is 0-100, nil when absent.
	OutputCompression *int
	// Members are the request's top-level members as sent.
	Members map[string]json.RawMessage
}

// maxImagePrompt is the longest prompt any OpenAI image model takes (the
// GPT image models'); shorter per-model limits are the provider's to
// enforce.
const maxImagePrompt = 32000

// ParseImagesRequest validates a CreateImageRequest body. Errors are
// *RequestError. The model is required although the specification defaults
// it to dall-e-2: the gateway routes by it.
func ParseImagesRequest(body []byte) (*ImagesRequest, error) {
	m, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	r := &ImagesRequest{Members: m, N: 1}
	if r.Model, err = requiredString(m, "model"); err != nil {
		return nil, err
	}
	if r.Prompt, err = requiredString(m, "prompt"); err != nil {
		return nil, err
	}
	if n := utf8.RuneCountInString(r.Prompt); n > maxImagePrompt {
		return nil, invalidValue("prompt", "string too long. Expected a string with maximum length %d, but got a string with length %d instead.", maxImagePrompt, n)
	}
	for _, c := range []struct {
		name   string
		lo, hi float64
	}{{"n", 1, 10}, {"output_compression", 0, 100}, {"partial_images", 0, 3}} {
		if err := integerIn(m, c.name, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	if r.Size, err = imageSize(m); err != nil {
		return nil, err
	}
	var user string
	for _, e := range []struct {
		dst    *string
		name   string
		values []string
	}{
		{&r.Quality, "quality", []string{"standard", "hd", "low", "medium", "high", "auto"}},
		{&r.ResponseFormat, "response_format", []string{"url", "b64_json"}},
		{&r.Style, "style", []string{"vivid", "natural"}},
		{&r.OutputFormat, "output_format", []string{"png", "jpeg", "webp"}},
		{&r.Background, "background", []string{"transparent", "opaque", "auto"}},
		{&r.Moderation, "moderation", []string{"low", "auto"}},
		{&user, "user", nil},
	} {
		if *e.dst, err = optionalEnum(m, e.name, e.values...); err != nil {
			return nil, err
		}
	}
	stream, err := optionalBool(m, "stream")
	if err != nil {
		return nil, err
	}
	if stream {
		return nil, &RequestError{Param: "stream", Code: "unsupported_value",
			Message: "Streaming image generation is not supported by this gateway; send the request without 'stream'."}
	}
	if raw := m["n"]; !jsonscan.IsNull(raw) {
		json.Unmarshal(raw, &r.N) //nolint:errcheck // checked by integerIn
	}
	if raw := m["output_compression"]; !jsonscan.IsNull(raw) {
		var c int
		json.Unmarshal(raw, &c) //nolint:errcheck // checked by integerIn
		r.OutputCompression = &c
	}
	if r.ResponseFormat == "" {
		r.ResponseFormat = "url"
		if strings.HasPrefix(r.Model, "gpt-image") {
			r.ResponseFormat = "b64_json"
		}
	}
	return r, nil
}

// optionalEnum reads a string member; with values, it must be one of them.
func optionalEnum(m map[string]json.RawMessage, name string, values ...string) (string, error) {
	raw := m[name]
	if jsonscan.IsNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", wrongType(name, "a string", raw)
	}
	if len(values) > 0 && !slices.Contains(values, s) {
		return "", invalidValue(name, "value: '%s'. Supported values are: %s.", s, quoteList(values))
	}
	return s, nil
}

// imageSize reads size: "auto" or WIDTHxHEIGHT in pixels. Which sizes a
// model makes is each translator's business.
func imageSize(m map[string]json.RawMessage) (string, error) {
	s, err := optionalEnum(m, "size")
	if err != nil || s == "" || s == "auto" {
		return s, err
	}
	if _, _, ok := ParseImageSize(s); !ok {
		return "", invalidValue("size", "value: '%s'. Expected 'auto' or WIDTHxHEIGHT in pixels, such as '1024x1024'.", s)
	}
	return s, nil
}

// ParseImageSize splits WIDTHxHEIGHT; both must be positive decimal
// integers of at most five digits.
func ParseImageSize(s string) (w, h int, ok bool) {
	ws, hs, found := strings.Cut(s, "x")
	if !found {
		return 0, 0, false
	}
	w, okW := pixels(ws)
	h, okH := pixels(hs)
	return w, h, okW && okH
}

func pixels(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

// ImageSizeError is the 400 for a size a model cannot make.
func ImageSizeError(model, size string, supported []string) error {
	return &RequestError{Param: "size", Code: "invalid_value",
		Message: fmt.Sprintf("Invalid 'size': the model '%s' cannot make '%s'. Supported values are: %s.", Clip(model, maxQuoted), Clip(size, maxQuoted), quoteList(supported))}
}

// ImageCountError is the 400 for more images than a model makes at once.
func ImageCountError(model string, n, max int) error {
	if max == 1 {
		return &RequestError{Param: "n", Code: "invalid_value",
			Message: fmt.Sprintf("Invalid 'n': the model '%s' only supports n=1, got %d.", Clip(model, maxQuoted), n)}
	}
	return &RequestError{Param: "n", Code: "invalid_value",
		Message: fmt.Sprintf("Invalid 'n': the model '%s' makes at most %d images per request, got %d.", Clip(model, maxQuoted), max, n)}
}

// ImageParamError is the 400 for a parameter value a model does not
// support although the specification allows it.
func ImageParamError(param, value, model string) error {
	return &RequestError{Param: param, Code: "invalid_value",
		Message: fmt.Sprintf("Invalid '%s': the model '%s' does not support '%s'.", param, Clip(model, maxQuoted), Clip(value, maxQuoted))}
}

// ContentPolicyError is the 400 OpenAI gives when its safety system
// refuses a prompt or the images made for it.
func ContentPolicyError(message string) *RequestError {
	return &RequestError{Code: "content_policy_violation", Message: message}
}
