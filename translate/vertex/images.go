package vertex

import (
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/gemini"
)

// images wraps the Gemini API's Imagen translator: Vertex AI's predict
// takes the same body and answers the same way.
type images struct {
	translate.Translator
	target translate.Target
}

// NewImages returns the image generation translator for provider vertex:
// Imagen models through publishers/google/models/{model}:predict.
func NewImages(t translate.Target, req *api.ImagesRequest) translate.Translator {
	return &images{Translator: gemini.NewImages(t, req), target: t}
}

// RequestBody points the request at Vertex AI with the bearer token.
func (im *images) RequestBody() (translate.Upstream, error) {
	up, err := im.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	return address(up, im.target, "google", ":predict"), nil
}

// Output implements translate.Reporter: the wrapped translator's report.

var _ translate.Reporter = (*images)(nil)
