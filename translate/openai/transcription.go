package openai

import (
	"errors"

	"modelgate/translate"
)

// TranscriptionRequest is a validated CreateTranscriptionRequest.
type TranscriptionRequest struct {
	Model string
}

// ParseTranscriptionRequest validates a multipart/form-data
// CreateTranscriptionRequest.
func ParseTranscriptionRequest(contentType string, body []byte) (*TranscriptionRequest, error) {
	return nil, errors.New("transcriptions: not implemented yet")
}

// NewTranscription returns the transcription translator for provider
// openai and OpenAI-compatible servers.
func NewTranscription(t translate.Target, req *TranscriptionRequest) translate.Translator { return nil }
