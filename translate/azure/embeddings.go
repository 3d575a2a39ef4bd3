package azure

import (
	"net/url"

	"modelgate/translate"
	"modelgate/translate/openai"
)

// embeddings wraps the OpenAI translator; only the request differs.
type embeddings struct {
	translate.Translator
	target translate.Target
}

// NewEmbeddings returns the embeddings translator for provider azure. The
// upstream model name is the deployment name; Azure OpenAI encodes base64
// and shortens dimensions itself, as OpenAI does.
func NewEmbeddings(t translate.Target, req *openai.EmbeddingsRequest) translate.Translator {
	return &embeddings{Translator: openai.NewEmbeddings(t, req), target: t}
}

// RequestBody sends the OpenAI body to the deployment with api-key auth.
func (e *embeddings) RequestBody() (translate.Upstream, error) {
	up, err := e.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	version := e.target.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	up.Path = e.target.BasePath + "/openai/deployments/" + url.PathEscape(e.target.Model) +
		"/embeddings?api-version=" + url.QueryEscape(version)
	up.Headers = withAPIKey(up.Headers, e.target.APIKey)
	return up, nil
}
