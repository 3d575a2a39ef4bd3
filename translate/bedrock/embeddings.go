package bedrock

import (
	"modelgate/translate"
	"modelgate/translate/openai"
)

// NewEmbeddings returns the embeddings translator for provider bedrock.
func NewEmbeddings(t translate.Target, req *openai.EmbeddingsRequest) translate.Translator { return nil }
