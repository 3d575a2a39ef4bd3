// Package providers is the one table of the providers a backend can be
// configured with: each provider's name, the endpoints it serves and the
// constructors of their translators. The ext_proc server, the config's
// validation and the tests read it; adding a provider is its package under
// translate/ and one line here (or, for a server that speaks the OpenAI
// API, one line of quirks in translate/openai).
package providers

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/azure"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/messages"
	"modelgate/translate/openai"
	"modelgate/translate/responses"
	"modelgate/translate/vertex"
)

// Provider is one provider kind. A nil constructor means the provider does
// not serve that endpoint; every provider serves chat completions.
type Provider struct {
	Name          string
	Chat          func(translate.Target, *api.ChatRequest) translate.Translator
	Embeddings    func(translate.Target, *api.EmbeddingsRequest) translate.Translator
	Images        func(translate.Target, *api.ImagesRequest) translate.Translator
	Transcription func(translate.Target, *api.TranscriptionRequest) translate.Translator
	// Responses serves POST /v1/responses natively; nil serves it through
	// Chat (responses.ToChat and responses.NewTranslator).
	Responses ResponsesFunc
	// Messages serves Anthropic's Messages API (POST /v1/messages) as the
	// client sent it; nil (or a nil translator, for a model it does not
	// serve so) serves it through Chat. CountTokens is its exact
	// count_tokens; nil (or a nil translator, for a model it does not
	// count) leaves the count to the gateway's estimate.
	Messages    func(translate.Target, *api.MessagesRequest) translate.Translator
	CountTokens func(translate.Target, *api.MessagesRequest) translate.Translator
	// TokenCounting reports the upstream models whose count_tokens
	// CountTokens serves (nil: none), so the gateway knows before it
	// builds a translator whether it estimates the count itself.
	TokenCounting func(model string) bool
	// Reasons reports the upstream models that reason when asked to, for
	// a model whose configuration does not say (routing.Capabilities);
	// nil knows of none that does not. Bedrock's reason only as Claude
	// (its translators refuse reasoning_effort elsewhere).
	Reasons func(model string) bool
	// WebSearch: the provider searches the web itself when a model may
	// (Anthropic's and Gemini's search tools, OpenAI's web_search).
	WebSearch bool
	// Compact serves POST /v1/responses/compact natively; nil compacts
	// through Chat (responses.NewCompactBridge).
	Compact func(t translate.Target, r *responses.Request, history []json.RawMessage) translate.Translator
	// DefaultMaxOutput is the bound on the answer a chat request to the
	// upstream model carries when the client sets none (Anthropic requires
	// one); nil or zero when it carries none. The translators report the
	// bound they sent (translate.OutputBound); this is for the gateway's
	// reservation before it knows the deployment (a Fallback model's).
	DefaultMaxOutput func(model string) int64
	// Credential is how the provider's requests are authorized.
	Credential Credential
	// Headers are the request headers its translators may set besides
	// content-type: credentials, API versions, signatures. An attempt of a
	// Fallback model removes those of every other provider, which an
	// earlier attempt may have left in the request Envoy keeps.
	Headers []string
	// TelemetryName is the provider's gen_ai.provider.name in OpenTelemetry
	// (the semantic conventions' well-known value); empty for Name.
	TelemetryName string
}

// Credential is how a provider's requests are authorized.
type Credential int

const (
	// APIKey is a key the backend's api_key_env names.
	APIKey Credential = iota
	// AWS is a Bedrock API key, else AWS credentials (the backend's or the
	// standard environment variables) that sign every request with SigV4.
	AWS
	// GoogleCloud is an access token minted from the backend's service
	// account, else Application Default Credentials, for the Google Cloud
	// project the backend names.
	GoogleCloud
)

// ResponsesTranslator translates one POST /v1/responses exchange and knows
// the response's id and the conversation a continuation of it replays.
type ResponsesTranslator interface {
	translate.Translator
	ID() string
	Conversation() []json.RawMessage
}

// ResponsesFunc builds a native Responses translator from the client's
// request, the conversation it continues and the id of the response.
type ResponsesFunc func(t translate.Target, r *responses.Request, history []json.RawMessage, id string) ResponsesTranslator

// table lists the providers with translators of their own; the
// OpenAI-compatible family is added from openai.CompatibleProviders.
var table = []Provider{
	{Name: "openai", WebSearch: true, Chat: openai.NewChat, Embeddings: openai.NewEmbeddings, Images: openai.NewImages, Transcription: openai.NewTranscription, Responses: native(responses.NewPassthrough),
		Compact: func(t translate.Target, r *responses.Request, history []json.RawMessage) translate.Translator {
			return responses.NewCompactPassthrough(t, r, history)
		},
		Headers: bearer},
	{Name: "azure", WebSearch: true, Chat: azure.NewChat, Embeddings: azure.NewEmbeddings, Images: azure.NewImages, Transcription: azure.NewTranscription, Responses: native(azure.NewResponses),
		Headers: []string{"api-key"}, TelemetryName: "azure.ai.openai"},
	{Name: "anthropic", WebSearch: true, Chat: anthropic.NewChat, Messages: anthropic.NewMessages, CountTokens: anthropic.NewCountTokens, TokenCounting: func(string) bool { return true }, DefaultMaxOutput: func(string) int64 { return anthropic.DefaultMaxTokens },
		Headers: []string{"x-api-key", "anthropic-version", "anthropic-beta"}},
	{Name: "bedrock", Chat: bedrock.NewChat, Messages: bedrock.NewMessages, CountTokens: bedrock.NewCountTokens, TokenCounting: bedrock.CountsTokens, Embeddings: bedrock.NewEmbeddings, Images: bedrock.NewImages, Reasons: bedrock.Reasons,
		Credential: AWS, Headers: []string{"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}, TelemetryName: "aws.bedrock"},
	{Name: "gemini", WebSearch: true, Chat: gemini.NewChat, Embeddings: gemini.NewEmbeddings, Images: gemini.NewImages,
		Headers: []string{"x-goog-api-key"}, TelemetryName: "gcp.gemini"},
	{Name: "vertex", WebSearch: true, Chat: vertex.NewChat, Messages: vertex.NewMessages, Embeddings: vertex.NewEmbeddings, Images: vertex.NewImages, DefaultMaxOutput: vertex.DefaultMaxOutput,
		Credential: GoogleCloud, Headers: bearer, TelemetryName: "gcp.vertex_ai"},
	{Name: "cohere", Chat: cohere.NewChat, Embeddings: cohere.NewEmbeddings, Headers: bearer},
}

// bearer are the headers of a provider that takes its key as a bearer
// token.
var bearer = []string{"authorization"}

// telemetryNames are the gen_ai.provider.name of OpenAI-compatible
// providers the semantic conventions name otherwise.
var telemetryNames = map[string]string{"mistral": "mistral_ai", "xai": "x_ai"}

// all is the table with the OpenAI-compatible family, by name.
var all = func() map[string]Provider {
	m := make(map[string]Provider, len(table))
	for _, p := range table {
		m[p.Name] = p
	}
	for name, q := range openai.CompatibleProviders() {
		p := Provider{Name: name, Chat: openai.NewCompatibleChat(q), Headers: bearer, TelemetryName: telemetryNames[name]}
		if !q.NoEmbeddings {
			p.Embeddings = openai.NewCompatibleEmbeddings(q)
		}
		if !q.NoTranscription {
			p.Transcription = openai.NewCompatibleTranscription(q)
		}
		m[name] = p
	}
	return m
}()

// RequestHeaders are the request headers any provider's translators may
// set besides content-type (Provider.Headers), sorted.
func RequestHeaders() []string {
	var names []string
	for _, p := range all {
		names = append(names, p.Headers...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// GenAIName is the provider's gen_ai.provider.name.
func (p Provider) GenAIName() string { return cmp.Or(p.TelemetryName, p.Name) }

// Lookup returns the provider of that name.
func Lookup(name string) (Provider, bool) {
	p, ok := all[name]
	return p, ok
}

// All returns every provider, sorted by name.
func All() []Provider {
	ps := make([]Provider, 0, len(all))
	for _, p := range all {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b Provider) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

// Names returns the provider names, sorted.
func Names() []string {
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// ResponsesTranslator builds the translator of a POST /v1/responses
// exchange: the provider's native one, else one over its chat
// translator. created is the response's creation time (Unix seconds)
// where the gateway makes the Response object.
func (p Provider) ResponsesTranslator(t translate.Target, r *responses.Request, history []json.RawMessage, id string, created int64) (ResponsesTranslator, error) {
	if p.Responses != nil {
		return p.Responses(t, r, history, id), nil
	}
	search := responses.WebSearch(t.WebSearch)
	chat, err := responses.ToChat(r, history, search)
	if err != nil {
		return nil, err
	}
	return responses.NewTranslator(p.Chat(t, chat), r, history, id, created, search), nil
}

// MessagesTranslator builds the translator of a POST /v1/messages
// exchange: the provider's native one where it serves the model so, else
// one over its chat translator (messages.NewBridge, which fails for a
// request it cannot carry).
func (p Provider) MessagesTranslator(t translate.Target, req *api.MessagesRequest) (translate.Translator, error) {
	if p.Messages != nil {
		if tr := p.Messages(t, req); tr != nil {
			return tr, nil
		}
	}
	return messages.NewBridge(p.Chat, t, req)
}

// CountsTokens reports whether the provider counts a Messages request's
// tokens itself (CountTokens) for the upstream model.
func (p Provider) CountsTokens(model string) bool {
	return p.CountTokens != nil && p.TokenCounting != nil && p.TokenCounting(model)
}

// CompactTranslator builds the translator of a POST /v1/responses/compact
// exchange: the provider's native one, else one that asks its chat
// translator for a summary. id and created name the compacted response.
func (p Provider) CompactTranslator(t translate.Target, r *responses.Request, history []json.RawMessage, id string, created int64) (translate.Translator, error) {
	if p.Compact != nil {
		return p.Compact(t, r, history), nil
	}
	return responses.NewCompactBridge(func(req *api.ChatRequest) translate.Translator { return p.Chat(t, req) }, r, history, id, created)
}

// native adapts a constructor of a concrete Responses translator.
func native[T ResponsesTranslator](f func(translate.Target, *responses.Request, []json.RawMessage, string) T) ResponsesFunc {
	return func(t translate.Target, r *responses.Request, history []json.RawMessage, id string) ResponsesTranslator {
		return f(t, r, history, id)
	}
}
