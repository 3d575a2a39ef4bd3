package openai

import (
	"errors"

	"modelgate/translate"
)

// EmbeddingsRequest is a validated CreateEmbeddingRequest.
type EmbeddingsRequest struct {
	Model string
}

// ParseEmbeddingsRequest validates a CreateEmbeddingRequest body.
func ParseEmbeddingsRequest(body []byte) (*EmbeddingsRequest, error) {
	return nil, errors.New("embeddings: not implemented yet")
}

// NewEmbeddings returns the embeddings translator for provider openai.
func NewEmbeddings(t translate.Target, req *EmbeddingsRequest) translate.Translator { return nil }

// NewCompatibleEmbeddings returns the embeddings translator constructor for
// an OpenAI-compatible server with these quirks.
func NewCompatibleEmbeddings(q Quirks) func(translate.Target, *EmbeddingsRequest) translate.Translator {
	return NewEmbeddings
}
