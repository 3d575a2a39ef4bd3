package openai

import (
	"errors"

	"modelgate/translate"
)

// ImagesRequest is a validated CreateImageRequest.
type ImagesRequest struct {
	Model string
	// ResponseFormat is "url" or "b64_json" as the client asked.
	ResponseFormat string
}

// ParseImagesRequest validates a CreateImageRequest body.
func ParseImagesRequest(body []byte) (*ImagesRequest, error) {
	return nil, errors.New("images: not implemented yet")
}

// NewImages returns the image generation translator for provider openai.
func NewImages(t translate.Target, req *ImagesRequest) translate.Translator { return nil }

// ImagesToURLs replaces every b64_json image in an ImagesResponse body
// with the URL keep returns for its bytes.
func ImagesToURLs(body []byte, keep func(data []byte, contentType string) (string, error)) ([]byte, error) {
	return body, nil
}
