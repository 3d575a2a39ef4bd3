// Package azure translates chat completions for Azure OpenAI. The wire
// format is OpenAI's, so the OpenAI translator does the work; Azure differs
// in the deployment path, the api-version query and the api-key header.
package azure

import (
	"net/url"

	"modelgate/translate"
	"modelgate/translate/openai"
)

// DefaultAPIVersion is the GA api-version used when the backend sets none.
const DefaultAPIVersion = "2024-10-21"

// chat wraps the OpenAI translator; only the request differs.
type chat struct {
	translate.Translator
	target translate.Target
}

// NewChat returns the chat translator for provider azure. The upstream
// model name is the Azure deployment name.
func NewChat(t translate.Target, req *openai.ChatRequest) translate.Translator {
	return &chat{Translator: openai.NewChat(t, req), target: t}
}

// RequestBody sends the OpenAI body to the deployment with api-key auth.
func (c *chat) RequestBody() (translate.Upstream, error) {
	up, err := c.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	version := c.target.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	up.Path = c.target.BasePath + "/openai/deployments/" + url.PathEscape(c.target.Model) +
		"/chat/completions?api-version=" + url.QueryEscape(version)
	headers := up.Headers[:0]
	for _, h := range up.Headers {
		if h.Name != "authorization" {
			headers = append(headers, h)
		}
	}
	if c.target.APIKey != "" {
		headers = append(headers, translate.Header{Name: "api-key", Value: c.target.APIKey})
	}
	up.Headers = headers
	return up, nil
}
