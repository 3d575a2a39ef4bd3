package azure

import (
	"net/url"

	"modelgate/translate"
	"modelgate/translate/openai"
)

// images wraps the OpenAI translator: Azure OpenAI's images API is
// OpenAI's on the deployment's path.
type images struct {
	translate.Translator
	target translate.Target
}

// NewImages returns the image generation translator for provider azure.
// The upstream model is the deployment name; when it names an OpenAI model
// (as deployments usually do) that model's rules apply, otherwise the
// request passes as sent for Azure to judge.
func NewImages(t translate.Target, req *openai.ImagesRequest) translate.Translator {
	return &images{Translator: openai.NewImages(t, req), target: t}
}

// RequestBody sends the OpenAI body to the deployment with api-key auth.
func (im *images) RequestBody() (translate.Upstream, error) {
	up, err := im.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	version := im.target.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	up.Path = im.target.BasePath + "/openai/deployments/" + url.PathEscape(im.target.Model) +
		"/images/generations?api-version=" + url.QueryEscape(version)
	up.Headers = withAPIKey(up.Headers, im.target.APIKey)
	return up, nil
}
