package extproc

import (
	"encoding/json"
	"strings"

	"modelgate/envoy/routing"
	"modelgate/translate/api"
	"modelgate/translate/sse"
)

// dialect is the API a front door speaks: OpenAI's, which every endpoint
// but the Messages API's serves, or Anthropic's. It owns what a client of
// that API expects of the gateway itself: where its key is, how an error
// and the error that ends a stream look, how the model list and a model
// look, and which of the API's own headers the translators read. What a
// translated answer carries is the translators' (translate.Reporter).
type dialect struct {
	name string
	// headerPrefix starts the API's own request headers, which a client
	// never sends on to a provider (strippedPrefixes) but for
	// clientHeaders.
	headerPrefix string
	// clientHeaders are the API's headers its translators read (the
	// version and betas of a Messages request): kept at the request's
	// headers and removed at its body unless the translator sets them
	// (sentHeaders), so that an attempt of a Fallback model, which reads
	// the header map Envoy keeps for all attempts, still finds them.
	clientHeaders []string
	// envoyReplies is the value of routing.DialectKey that has Envoy's
	// own replies (envoy.localReplyConfig) answer in the API's shape; ""
	// for OpenAI's, their default.
	envoyReplies string
	// key reads the client's key from the request's headers.
	key func(hm headerMap) (string, bool)
	// errorBody renders an error the gateway answers with.
	errorBody func(e *APIError) []byte
	// streamError is the event that ends a stream the gateway fails,
	// when the translator has no end of its own (translate.StreamFailer).
	streamError func(e *APIError) []byte
	// model and list render GET /v1/models/{model} and GET /v1/models.
	model func(e entry) any
	list  func(es []entry) any
}

// Headers of Anthropic's API that its clients send and the Messages
// translators read.
const (
	anthropicVersionHeader = "anthropic-version"
	anthropicBetaHeader    = "anthropic-beta"
)

var (
	// openAIDialect is OpenAI's API: its keys come as Authorization:
	// Bearer, else as x-api-key (which some OpenAI-compatible clients
	// send).
	openAIDialect = &dialect{
		name:         "openai",
		headerPrefix: "openai-",
		key: func(hm headerMap) (string, bool) {
			if key, ok := bearer(hm.get("authorization")); ok {
				return key, true
			}
			return apiKeyHeader(hm)
		},
		errorBody: (*APIError).openAIBody,
		streamError: func(e *APIError) []byte {
			return sse.AppendData(nil, e.openAIBody())
		},
		model: func(e entry) any { return modelOf(e) },
		list: func(es []entry) any {
			out := modelList{Object: "list", Data: make([]modelObject, 0, len(es))}
			for _, e := range es {
				out.Data = append(out.Data, modelOf(e))
			}
			return out
		},
	}
	// anthropicDialect is Anthropic's Messages API: its SDKs send the key
	// as x-api-key, and Claude Code (with an auth token) as Authorization:
	// Bearer.
	anthropicDialect = &dialect{
		name:          "anthropic",
		headerPrefix:  "anthropic-",
		clientHeaders: []string{anthropicBetaHeader, anthropicVersionHeader},
		envoyReplies:  routing.AnthropicDialect,
		key: func(hm headerMap) (string, bool) {
			if key, ok := apiKeyHeader(hm); ok {
				return key, true
			}
			return bearer(hm.get("authorization"))
		},
		errorBody: func(e *APIError) []byte {
			return api.MessagesError(api.MessagesErrorType(e.Status), e.Message)
		},
		streamError: func(e *APIError) []byte {
			body := api.MessagesError(api.MessagesErrorType(e.Status), e.Message)
			return sse.AppendData([]byte("event: error\n"), body)
		},
		model: func(e entry) any { return anthropicModelOf(e) },
		list: func(es []entry) any {
			out := anthropicModelList{Data: make([]anthropicModel, 0, len(es))}
			for _, e := range es {
				out.Data = append(out.Data, anthropicModelOf(e))
			}
			if n := len(out.Data); n > 0 {
				out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
			}
			return out
		},
	}
	dialects = []*dialect{openAIDialect, anthropicDialect}
)

func apiKeyHeader(hm headerMap) (string, bool) {
	key := strings.TrimSpace(hm.get("x-api-key"))
	return key, key != ""
}

func bearer(authorization string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

// render marshals what the dialect's model and list functions make:
// plain strings and numbers, which cannot fail.
func render(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
