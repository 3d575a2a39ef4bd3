package azure

import (
	"modelgate/translate"
	"modelgate/translate/openai"
)

// NewEmbeddings returns the embeddings translator for provider azure.
func NewEmbeddings(t translate.Target, req *openai.EmbeddingsRequest) translate.Translator { return nil }
