package azure

import (
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/openai"
)

// transcription is OpenAI's transcription translator on a deployment:
// Azure takes the same multipart form and answers in the same formats
// (whisper deployments all five, gpt-4o-transcribe ones json and text).
// Its Usage is the wrapped translator's, AudioSeconds included.
type transcription struct{ *deployment }

// NewTranscription returns the transcription translator for provider
// azure. The upstream model name is the Azure deployment name.
func NewTranscription(t translate.Target, req *api.TranscriptionRequest) translate.Translator {
	return transcription{&deployment{Translator: openai.NewTranscription(t, req), target: t, op: "audio/transcriptions"}}
}
