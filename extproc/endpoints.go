package extproc

import (
	"fmt"
	"net/http"
	"strings"

	"modelgate/translate/providers"
)

// endpoint is a client-facing API the gateway serves.
type endpoint int

const (
	endpointNone endpoint = iota
	endpointModels
	endpointChat
	endpointResponses
	endpointCompact // POST /v1/responses/compact
	endpointEmbeddings
	endpointImages
	endpointTranscriptions
	endpointImageFile // a signed URL of an image the gateway keeps
	// The gateway answers these itself, from its routing table and its
	// store of responses.
	endpointModel          // GET /v1/models/{model}
	endpointResponseGet    // GET /v1/responses/{id}
	endpointResponseDelete // DELETE /v1/responses/{id}
	endpointInputItems     // GET /v1/responses/{id}/input_items
	// Anthropic's Messages API, the second front door.
	endpointMessages    // POST /v1/messages
	endpointCountTokens // POST /v1/messages/count_tokens
	endpointRoot        // HEAD or GET /: a client's check that the gateway is up
)

// Path prefixes of the resources the gateway answers itself.
const (
	modelPrefix      = "/v1/models/"
	responsePrefix   = "/v1/responses/"
	inputItemsSuffix = "/input_items"
)

// dispatch maps method and path to an endpoint.
func dispatch(method, path string) (endpoint, error) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch {
	case method == http.MethodGet && path == "/v1/models":
		return endpointModels, nil
	case method == http.MethodPost && path == "/v1/chat/completions":
		return endpointChat, nil
	case method == http.MethodPost && path == "/v1/messages":
		return endpointMessages, nil
	case method == http.MethodPost && path == "/v1/messages/count_tokens":
		return endpointCountTokens, nil
	case (method == http.MethodHead || method == http.MethodGet) && path == "/":
		return endpointRoot, nil
	case method == http.MethodPost && path == "/v1/responses":
		return endpointResponses, nil
	case method == http.MethodPost && path == "/v1/responses/compact":
		return endpointCompact, nil
	case method == http.MethodPost && path == "/v1/embeddings":
		return endpointEmbeddings, nil
	case method == http.MethodPost && path == "/v1/images/generations":
		return endpointImages, nil
	case method == http.MethodPost && path == "/v1/audio/transcriptions":
		return endpointTranscriptions, nil
	case (method == http.MethodGet || method == http.MethodHead) && strings.HasPrefix(path, imageFilePrefix):
		return endpointImageFile, nil
	case method == http.MethodGet && len(path) > len(modelPrefix) && strings.HasPrefix(path, modelPrefix):
		return endpointModel, nil
	case strings.HasPrefix(path, responsePrefix):
		rest := path[len(responsePrefix):]
		if id, ok := strings.CutSuffix(rest, inputItemsSuffix); ok && method == http.MethodGet && pathID(id) {
			return endpointInputItems, nil
		}
		if pathID(rest) && method == http.MethodGet {
			return endpointResponseGet, nil
		}
		if pathID(rest) && method == http.MethodDelete {
			return endpointResponseDelete, nil
		}
	}
	return endpointNone, errUnknownURL(method, path)
}

// pathID reports whether s can be one path segment naming a resource.
func pathID(s string) bool { return s != "" && !strings.Contains(s, "/") }

// endpointSpec is what sets an endpoint apart in the exchange's shared
// code, which reads it here rather than asking which endpoint it serves.
type endpointSpec struct {
	name string
	// served: the gateway answers it itself (served.serve), from its
	// routing table and its store of responses, with no body and no
	// provider.
	served bool
	// signed: the gateway answers it itself (Server.serveImage), and
	// the URL's signature is the credential rather than a key.
	signed bool
	// generates: its answers are generated text, which providers count as
	// completion tokens.
	generates bool
	// form: its body is a multipart form (an upload of audio), bounded by
	// Config.MaxAudioBodyBytes, with no prompt to estimate.
	form bool
	// operation is its gen_ai.operation.name: the semantic conventions'
	// value where they have one.
	operation string
	// serves reports whether a provider serves it, natively or (the
	// Responses API) through its chat translator.
	serves func(providers.Provider) bool
	// dialect is the API its clients speak (dialectOf); nil for OpenAI's.
	dialect *dialect
}

var endpoints = [...]endpointSpec{
	endpointNone:   {name: "none"},
	endpointModels: {name: "models", served: true},
	endpointChat: {name: "chat.completions", generates: true, operation: "chat",
		serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointResponses: {name: "responses", generates: true, operation: "chat",
		serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointCompact: {name: "responses.compact", generates: true, operation: "chat",
		serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointEmbeddings: {name: "embeddings", operation: "embeddings",
		serves: func(p providers.Provider) bool { return p.Embeddings != nil }},
	endpointImages: {name: "images.generations", operation: "image_generation",
		serves: func(p providers.Provider) bool { return p.Images != nil }},
	endpointTranscriptions: {name: "audio.transcriptions", form: true, operation: "transcription",
		serves: func(p providers.Provider) bool { return p.Transcription != nil }},
	endpointImageFile:      {name: "image_file", signed: true},
	endpointModel:          {name: "models.retrieve", served: true},
	endpointResponseGet:    {name: "responses.retrieve", served: true},
	endpointResponseDelete: {name: "responses.delete", served: true},
	endpointInputItems:     {name: "responses.input_items", served: true},
	endpointMessages: {name: "messages", generates: true, operation: "chat", dialect: anthropicDialect,
		serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointCountTokens: {name: "messages.count_tokens", dialect: anthropicDialect,
		serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointRoot: {name: "root"},
}

func (e endpoint) spec() *endpointSpec { return &endpoints[e] }

func (e endpoint) String() string { return endpoints[e].name }

// dialectOf is the dialect of a request to ep with headers hm.
func dialectOf(ep endpoint, hm headerMap) *dialect {
	switch {
	case ep.spec().dialect != nil:
		return ep.spec().dialect
	case ep == endpointModels || ep == endpointModel:
		return modelsDialect(hm)
	}
	return openAIDialect
}

// modelsDialect is the dialect of a request for the model list or a
// model, which both APIs name alike: Anthropic's for a client that sends
// its version header or its key as x-api-key (Claude Code), else OpenAI's.
func modelsDialect(hm headerMap) *dialect {
	if hm.get(anthropicVersionHeader) != "" || hm.get("x-api-key") != "" {
		return anthropicDialect
	}
	return openAIDialect
}

// imageFilePrefix is the path of the images the gateway keeps. It is
// outside /v1 so that it can never shadow an OpenAI endpoint.
const imageFilePrefix = "/modelgate/images/"

// errEndpointNotSupported is a model whose provider does not serve the
// endpoint, such as embeddings from an Anthropic model.
func errEndpointNotSupported(model string, ep endpoint) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "model",
		Message: fmt.Sprintf("The model `%s` does not support %s.", quoted(model), ep)}
}
