package azure

import (
	"net/url"

	"modelgate/translate"
	"modelgate/translate/openai"
)

// transcription wraps the OpenAI transcription translator: Azure takes the
// same multipart form and answers in the same formats (whisper deployments
// all five, gpt-4o-transcribe ones json and text); only the request's
// path and credential differ.
type transcription struct {
	translate.Translator
	target translate.Target
}

// NewTranscription returns the transcription translator for provider
// azure. The upstream model name is the Azure deployment name.
func NewTranscription(t translate.Target, req *openai.TranscriptionRequest) translate.Translator {
	return &transcription{Translator: openai.NewTranscription(t, req), target: t}
}

// RequestBody sends the form to the deployment with api-key auth.
func (c *transcription) RequestBody() (translate.Upstream, error) {
	up, err := c.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	version := c.target.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	up.Path = c.target.BasePath + "/openai/deployments/" + url.PathEscape(c.target.Model) +
		"/audio/transcriptions?api-version=" + url.QueryEscape(version)
	up.Headers = withAPIKey(up.Headers, c.target.APIKey)
	return up, nil
}

// AudioSeconds is the wrapped translator's: the audio duration Azure
// billed by, zero when it reported none.
func (c *transcription) AudioSeconds() float64 {
	if a, ok := c.Translator.(interface{ AudioSeconds() float64 }); ok {
		return a.AudioSeconds()
	}
	return 0
}
