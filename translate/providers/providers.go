// Package providers is the one table of the providers a backend can be
// configured with: each provider's name, the endpoints it serves and the
// constructors of their translators. The ext_proc server, the config's
// validation and the tests read it; adding a provider is its package under
// translate/ and one line here (or, for a server that speaks the OpenAI
// API, one line of quirks in translate/openai).
package providers

import (
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
	// DefaultMaxOutput is the bound on the answer a chat request to the
	// upstream model carries when the client sets none (Anthropic requires
	// one); nil or zero when it carries none. The translators report the
	// bound they sent (translate.OutputBound); this is for the gateway's
	// reservation before it knows the deployment (a Fallback model's).
	DefaultMaxOutput func(model string) int64
}

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
	{Name: "openai", Chat: openai.NewChat, Embeddings: openai.NewEmbeddings, Images: openai.NewImages, Transcription: openai.NewTranscription, Responses: native(responses.NewPassthrough)},
	{Name: "azure", Chat: azure.NewChat, Embeddings: azure.NewEmbeddings, Images: azure.NewImages, Transcription: azure.NewTranscription, Responses: native(azure.NewResponses)},
	{Name: "anthropic", Chat: anthropic.NewChat, DefaultMaxOutput: func(string) int64 { return anthropic.DefaultMaxTokens }},
	{Name: "bedrock", Chat: bedrock.NewChat, Embeddings: bedrock.NewEmbeddings, Images: bedrock.NewImages},
	{Name: "gemini", Chat: gemini.NewChat, Embeddings: gemini.NewEmbeddings, Images: gemini.NewImages},
	{Name: "vertex", Chat: vertex.NewChat, Embeddings: vertex.NewEmbeddings, Images: vertex.NewImages, DefaultMaxOutput: vertex.DefaultMaxOutput},
	{Name: "cohere", Chat: cohere.NewChat, Embeddings: cohere.NewEmbeddings},
}

// all is the table with the OpenAI-compatible family, by name.
var all = func() map[string]Provider {
	m := make(map[string]Provider, len(table))
	for _, p := range table {
		m[p.Name] = p
	}
	for name, q := range openai.CompatibleProviders() {
		p := Provider{Name: name, Chat: openai.NewCompatibleChat(q)}
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

// native adapts a constructor of a concrete Responses translator.
func native[T ResponsesTranslator](f func(translate.Target, *responses.Request, []json.RawMessage, string) T) ResponsesFunc {
	return func(t translate.Target, r *responses.Request, history []json.RawMessage, id string) ResponsesTranslator {
		return f(t, r, history, id)
	}
}
