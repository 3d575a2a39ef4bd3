package gemini

import (
	"modelgate/translate"
	"modelgate/translate/openai"
)

// NewImages returns the image generation translator for provider gemini.
func NewImages(t translate.Target, req *openai.ImagesRequest) translate.Translator { return nil }
