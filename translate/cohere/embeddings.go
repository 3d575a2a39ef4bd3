package cohere

import (
	"modelgate/translate"
	"modelgate/translate/openai"
)

// NewEmbeddings returns the embeddings translator for provider cohere.
func NewEmbeddings(t translate.Target, req *openai.EmbeddingsRequest) translate.Translator { return nil }
