// Package vertex translates chat completions for Google Vertex AI: Gemini
// models through the publishers/google generateContent endpoints and
// Anthropic models through publishers/anthropic rawPredict. The wire
// formats are Gemini's and Anthropic's, so those translators do the work;
// Vertex differs in paths, in a bearer access token (minted by the gateway
// from a service account and passed as the target's APIKey) and, for
// Anthropic, in the body's anthropic_version instead of a model member.
package vertex

import (
	"encoding/json"
	"net/url"
	"strings"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/gemini"
)

// AnthropicVersion is the anthropic_version Vertex AI expects.
const AnthropicVersion = "vertex-2023-10-16"

// chat wraps the Gemini or Anthropic translator; only the request differs.
type chat struct {
	translate.Translator
	target    translate.Target
	stream    bool
	anthropic bool
}

// DefaultMaxOutput is the bound a chat request to model carries when the
// client sets none: Anthropic's default for Claude, none for Gemini.
func DefaultMaxOutput(model string) int64 {
	if isClaude(model) {
		return anthropic.DefaultMaxTokens
	}
	return 0
}

// isClaude reports whether model is served by Anthropic's publisher.
func isClaude(model string) bool { return strings.HasPrefix(model, "claude") }

// MaxOutputTokens implements translate.OutputBound for Claude's
// translator inside.
func (c *chat) MaxOutputTokens() int64 { return translate.MaxOutputTokens(c.Translator) }

// NewChat returns the chat translator for provider vertex. Models whose
// upstream name starts with "claude" go to Anthropic's publisher, all
// others to Google's.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	c := &chat{target: t, stream: req.Stream, anthropic: isClaude(t.Model)}
	if c.anthropic {
		c.Translator = anthropic.NewChatToolJSON(t, req)
	} else {
		c.Translator = gemini.NewChat(t, req)
	}
	return c
}

// RequestBody points the request at the Vertex AI endpoint.
func (c *chat) RequestBody() (translate.Upstream, error) {
	up, err := c.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	publisher, method := "google", ":generateContent"
	switch {
	case c.anthropic && c.stream:
		publisher, method = "anthropic", ":streamRawPredict"
	case c.anthropic:
		publisher, method = "anthropic", ":rawPredict"
	case c.stream:
		method = ":streamGenerateContent?alt=sse"
	}
	if c.anthropic {
		if up.Body, err = vertexAnthropicBody(up.Body); err != nil {
			return up, err
		}
	}
	return address(up, c.target, publisher, method), nil
}

// address points up at method on the publisher's model in the target's
// project and location (global when unset), with the bearer access token.
func address(up translate.Upstream, t translate.Target, publisher, method string) translate.Upstream {
	location := t.Region
	if location == "" {
		location = "global"
	}
	up.Path = t.BasePath + "/v1/projects/" + url.PathEscape(t.Project) + "/locations/" + url.PathEscape(location) +
		"/publishers/" + publisher + "/models/" + url.PathEscape(t.Model) + method
	up.Headers = []translate.Header{{Name: "content-type", Value: "application/json"}}
	if t.APIKey != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "authorization", Value: "Bearer " + t.APIKey})
	}
	return up
}

// vertexAnthropicBody moves the model to the path and sets the version.
func vertexAnthropicBody(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	delete(m, "model")
	m["anthropic_version"] = json.RawMessage(`"` + AnthropicVersion + `"`)
	return json.Marshal(m)
}

// messages relays a Messages API request to Claude on Vertex AI's
// rawPredict (streamRawPredict for a stream), which speaks the Messages
// API: the body as the client sent it but for the model, which goes in
// the path, and Vertex's anthropic_version in the body; anthropic-beta as
// sent. The answer comes back as Anthropic's would (anthropic.NewMessages).
type messages struct {
	translate.Translator
	target translate.Target
	req    *api.MessagesRequest
}

// NewMessages returns the translator of a Messages request to Claude on
// Vertex AI, or nil for a model of Google's publisher, which gets it
// through its chat translator.
func NewMessages(t translate.Target, r *api.MessagesRequest) translate.Translator {
	if !isClaude(t.Model) {
		return nil
	}
	return &messages{Translator: anthropic.NewMessages(t, r), target: t, req: r}
}

// RequestBody implements translate.Translator.
func (m *messages) RequestBody() (translate.Upstream, error) {
	up, err := m.Translator.RequestBody()
	if err != nil {
		return up, err
	}
	if up.Body, err = vertexAnthropicBody(up.Body); err != nil {
		return up, err
	}
	method := ":rawPredict"
	if m.req.Stream {
		method = ":streamRawPredict"
	}
	up = address(up, m.target, "anthropic", method)
	if m.req.Beta != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "anthropic-beta", Value: m.req.Beta})
	}
	return up, nil
}

// MaxOutputTokens implements translate.OutputBound.
func (m *messages) MaxOutputTokens() int64 { return translate.MaxOutputTokens(m.Translator) }

// FailStream implements translate.StreamFailer.
func (m *messages) FailStream(message, code string) []byte {
	return m.Translator.(translate.StreamFailer).FailStream(message, code)
}

// Output implements translate.Reporter: the wrapped translator's report.

var _ translate.Reporter = (*chat)(nil)

// Output implements translate.Reporter: the wrapped translator's report.

var _ translate.Reporter = (*messages)(nil)
