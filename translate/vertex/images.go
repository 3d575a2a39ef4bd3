package vertex

import (
	"modelgate/translate"
	"modelgate/translate/openai"
)

// NewImages returns the image generation translator for provider vertex.
func NewImages(t translate.Target, req *openai.ImagesRequest) translate.Translator { return nil }
