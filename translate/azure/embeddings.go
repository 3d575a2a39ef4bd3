package azure

import (
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/openai"
)

// NewEmbeddings returns the embeddings translator for provider azure. The
// upstream model name is the deployment name; Azure OpenAI encodes base64
// and shortens dimensions itself, as OpenAI does.
func NewEmbeddings(t translate.Target, req *api.EmbeddingsRequest) translate.Translator {
	return &deployment{Translator: openai.NewEmbeddings(t, req), target: t, op: "embeddings"}
}
