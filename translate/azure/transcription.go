package azure

import (
	"modelgate/translate"
	"modelgate/translate/openai"
)

// NewTranscription returns the transcription translator for provider azure.
func NewTranscription(t translate.Target, req *openai.TranscriptionRequest) translate.Translator {
	return nil
}
