package bedrock

import (
	"modelgate/translate"
	"modelgate/translate/openai"
)

// NewImages returns the image generation translator for provider bedrock.
func NewImages(t translate.Target, req *openai.ImagesRequest) translate.Translator { return nil }
