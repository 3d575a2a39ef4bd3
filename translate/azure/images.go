package azure

import (
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/openai"
)

// NewImages returns the image generation translator for provider azure:
// Azure OpenAI's images API is OpenAI's on the deployment's path. The
// upstream model is the deployment name; when it names an OpenAI model (as
// deployments usually do) that model's rules apply, otherwise the request
// passes as sent for Azure to judge.
func NewImages(t translate.Target, req *api.ImagesRequest) translate.Translator {
	return &deployment{Translator: openai.NewImages(t, req), target: t, op: "images/generations"}
}
