package vertex

import (
	"net/url"

	"modelgate/translate"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
)

// images wraps the Gemini API's Imagen translator: Vertex AI's predict
// takes the same body and answers the same way.
type images struct {
	translate.Translator
	target translate.Target
}

// NewImages returns the image generation translator for provider vertex:
// Imagen models through publishers/google/models/{model}:predict.
func NewImages(t translate.Target, req *openai.ImagesRequest) translate.Translator {
	return &images{Translator: gemini.NewImages(t, req), target: t}
}

// RequestBody points the request at Vertex AI with the bearer token.
func (im *images) RequestBody() (translate.Upstream, error) {
	up, err := im.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	location := im.target.Region
	if location == "" {
		location = "global"
	}
	up.Path = im.target.BasePath + "/v1/projects/" + url.PathEscape(im.target.Project) + "/locations/" + url.PathEscape(location) +
		"/publishers/google/models/" + url.PathEscape(im.target.Model) + ":predict"
	up.Headers = []translate.Header{{Name: "content-type", Value: "application/json"}}
	if im.target.APIKey != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "authorization", Value: "Bearer " + im.target.APIKey})
	}
	return up, nil
}
