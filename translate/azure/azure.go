// Package azure translates chat completions for Azure OpenAI. The wire
// format is OpenAI's, so the OpenAI translator does the work; Azure differs
// in the deployment path, the api-version query and the api-key header.
package azure

import (
	"encoding/json"
	"net/url"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/openai"
	"modelgate/translate/responses"
)

// DefaultAPIVersion is the GA api-version used when the backend sets none.
const DefaultAPIVersion = "2024-10-21"

// deployment wraps an OpenAI translator for one Azure deployment. Azure
// OpenAI speaks OpenAI's wire format; only the request differs: the
// deployment's path, the api-version query and the api-key header.
type deployment struct {
	translate.Translator
	target translate.Target
	op     string // the operation's path under the deployment, such as "chat/completions"
}

// NewChat returns the chat translator for provider azure. The upstream
// model name is the Azure deployment name.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	return &deployment{Translator: openai.NewChat(t, req), target: t, op: "chat/completions"}
}

// RequestBody sends the OpenAI request to the deployment with api-key auth.
func (d *deployment) RequestBody() (translate.Upstream, error) {
	up, err := d.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	version := d.target.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	up.Path = d.target.BasePath + "/openai/deployments/" + url.PathEscape(d.target.Model) +
		"/" + d.op + "?api-version=" + url.QueryEscape(version)
	up.Headers = withAPIKey(up.Headers, d.target.APIKey)
	return up, nil
}

// Responses is the Responses passthrough with Azure's request.
type Responses struct {
	*responses.Passthrough
	target translate.Target
}

// NewResponses returns the Responses translator for provider azure. Azure
// serves the Responses API on its v1 surface, /openai/v1/responses, which
// takes the deployment name as the model and no api-version.
func NewResponses(t translate.Target, r *responses.Request, history []json.RawMessage, id string) *Responses {
	return &Responses{Passthrough: responses.NewPassthrough(t, r, history, id), target: t}
}

// RequestBody sends the OpenAI request to the v1 surface with api-key auth.
func (a *Responses) RequestBody() (translate.Upstream, error) {
	up, err := a.Passthrough.RequestBody()
	if err != nil {
		return up, err
	}
	up.Path = a.target.BasePath + "/openai/v1/responses"
	up.Headers = withAPIKey(up.Headers, a.target.APIKey)
	return up, nil
}

// withAPIKey replaces bearer auth with Azure's api-key header.
func withAPIKey(headers []translate.Header, key string) []translate.Header {
	out := headers[:0]
	for _, h := range headers {
		if h.Name != "authorization" {
			out = append(out, h)
		}
	}
	if key != "" {
		out = append(out, translate.Header{Name: "api-key", Value: key})
	}
	return out
}

// Output implements translate.Reporter: the wrapped translator's report.

var _ translate.Reporter = (*deployment)(nil)
