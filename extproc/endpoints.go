package extproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"modelgate/authz/pricing"
	"modelgate/translate"
	"modelgate/translate/api"
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
	// served: the gateway answers it itself (exchange.serve), from its
	// routing table and its store of responses, with no body and no
	// provider.
	served bool
	// signed: the gateway answers it itself (exchange.serveImage), and
	// the URL's signature is the credential rather than a key.
	signed bool
	// flow makes the flow of a request that reaches a provider; nil for
	// the endpoints the gateway answers itself.
	flow func(s *Server, hm headerMap) flow
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
		flow: func(*Server, headerMap) flow { return chatFlow{} }, serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointResponses: {name: "responses", generates: true, operation: "chat",
		flow: func(*Server, headerMap) flow { return &responsesFlow{} }, serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointCompact: {name: "responses.compact", generates: true, operation: "chat",
		flow: func(*Server, headerMap) flow { return compactFlow{} }, serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointEmbeddings: {name: "embeddings", operation: "embeddings",
		flow: func(*Server, headerMap) flow { return embeddingsFlow{} }, serves: func(p providers.Provider) bool { return p.Embeddings != nil }},
	endpointImages: {name: "images.generations", operation: "image_generation",
		flow:   func(s *Server, hm headerMap) flow { return &imagesFlow{publicBase: s.publicBase(hm)} },
		serves: func(p providers.Provider) bool { return p.Images != nil }},
	endpointTranscriptions: {name: "audio.transcriptions", form: true, operation: "transcription",
		flow: func(*Server, headerMap) flow { return transcriptionFlow{} }, serves: func(p providers.Provider) bool { return p.Transcription != nil }},
	endpointImageFile:      {name: "image_file", signed: true},
	endpointModel:          {name: "models.retrieve", served: true},
	endpointResponseGet:    {name: "responses.retrieve", served: true},
	endpointResponseDelete: {name: "responses.delete", served: true},
	endpointInputItems:     {name: "responses.input_items", served: true},
	endpointMessages: {name: "messages", generates: true, operation: "chat", dialect: anthropicDialect,
		flow: func(_ *Server, hm headerMap) flow {
			return messagesFlow{version: hm.get(anthropicVersionHeader), beta: hm.get(anthropicBetaHeader)}
		},
		serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointCountTokens: {name: "messages.count_tokens", dialect: anthropicDialect,
		flow: func(_ *Server, hm headerMap) flow {
			return countTokensFlow{messagesFlow{version: hm.get(anthropicVersionHeader), beta: hm.get(anthropicBetaHeader)}}
		},
		serves: func(p providers.Provider) bool { return p.Chat != nil }},
	endpointRoot: {name: "root"},
}

func (e endpoint) spec() *endpointSpec { return &endpoints[e] }

func (e endpoint) String() string { return endpoints[e].name }

// flow is what a request to one endpoint that reaches a provider does in
// the exchange: it parses the client's request and routes its model,
// builds the translator of a deployment, adds to the translated answer
// what the gateway adds, and tells prices what the request asked for.
type flow interface {
	// parse validates the client's body, routes the model it names
	// (parser.pick) and hands over what builds the translator
	// (parser.translator).
	// A request the gateway answers itself once it is parsed (a token
	// count it estimates) gives its answer instead.
	parse(ctx context.Context, st parser, body []byte) (*localAnswer, error)
	// answer is what the client gets of the translation of the answer's
	// body, or of one chunk of a stream.
	answer(ctx context.Context, ac answerContext, out []byte, eos bool) ([]byte, error)
	// price is u with what prices count of the request: the images it
	// asks for (when reserving) and their size and quality. (By value:
	// a pointer through the interface would put u on the heap.)
	price(u pricing.Usage, reserving bool) pricing.Usage
}

// parser is the stream a flow parses a request for: the router-level
// exchange, or an attempt of a Fallback model (attemptStream), which
// route the model each their own way.
type parser interface {
	server() *Server
	request() *request
	// pick routes the model the request names.
	pick(ctx context.Context, model string) error
	// translator makes the stream's translator with build (or, for a
	// Fallback model at the router level, keeps build for the answer).
	translator(build builder) error
}

// passAnswer is the answer and prices of the flows that add nothing.
type passAnswer struct{}

// answerContext is what a flow sees of the exchange whose answer it adds
// to.
type answerContext struct {
	s       *Server
	account string         // the principal's account
	head    translate.Head // the answer's, as the client gets it
	log     *exchangeLog
}

func (passAnswer) answer(_ context.Context, _ answerContext, out []byte, _ bool) ([]byte, error) {
	return out, nil
}

func (passAnswer) price(u pricing.Usage, _ bool) pricing.Usage { return u }

type chatFlow struct{ passAnswer }

func (chatFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := api.ParseChatRequest(body)
	if err != nil {
		return nil, err
	}
	if err := st.pick(ctx, req.Model); err != nil {
		return nil, err
	}
	r := st.request()
	req, left, err := req.Permitted(st.server().webSearch(r.model))
	if err != nil {
		return nil, err
	}
	r.warning = left.Warning()
	r.stream, r.maxOutput, r.answers = req.Stream, maxOutputTokens(req.Members), api.PositiveInteger(req.Members, "n")
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		return p.Chat(t, req), nil
	})
}

type embeddingsFlow struct{ passAnswer }

func (embeddingsFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := api.ParseEmbeddingsRequest(body)
	if err != nil {
		return nil, err
	}
	if err := st.pick(ctx, req.Model); err != nil {
		return nil, err
	}
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Embeddings == nil {
			return nil, errEndpointNotSupported(req.Model, endpointEmbeddings)
		}
		return p.Embeddings(t, req), nil
	})
}

type transcriptionFlow struct{ passAnswer }

func (transcriptionFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := api.ParseTranscriptionRequest(st.request().contentType, body)
	if err != nil {
		return nil, err
	}
	if err := st.pick(ctx, req.Model); err != nil {
		return nil, err
	}
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Transcription == nil {
			return nil, errEndpointNotSupported(req.Model, endpointTranscriptions)
		}
		return p.Transcription(t, req), nil
	})
}

// imagesFlow is an image generation's: the images a provider returns as
// bytes become signed URLs of the gateway when the client asked for URLs
// (imageURLs), and prices count images of the size and quality asked.
type imagesFlow struct {
	req        *api.ImagesRequest
	publicBase string // where the client reaches the gateway, for image URLs
}

func (f *imagesFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := api.ParseImagesRequest(body)
	if err != nil {
		return nil, err
	}
	if err := st.pick(ctx, req.Model); err != nil {
		return nil, err
	}
	f.req = req
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Images == nil {
			return nil, errEndpointNotSupported(req.Model, endpointImages)
		}
		return p.Images(t, req), nil
	})
}

func (f *imagesFlow) answer(ctx context.Context, ac answerContext, out []byte, _ bool) ([]byte, error) {
	return f.imageURLs(ctx, ac, out)
}

func (f *imagesFlow) price(u pricing.Usage, reserving bool) pricing.Usage {
	if f.req == nil {
		return u
	}
	if reserving { // the images asked for; the answer's count is the provider's
		u.Images = int64(max(f.req.N, 1))
	}
	u.ImageSize, u.ImageQuality = f.req.Size, f.req.Quality
	return u
}

// errEndpointNotSupported is a model whose provider does not serve the
// endpoint, such as embeddings from an Anthropic model.
func errEndpointNotSupported(model string, ep endpoint) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "model",
		Message: fmt.Sprintf("The model `%s` does not support %s.", quoted(model), ep)}
}

// messagesFlow is a Messages API request's: relayed to a provider of the
// Messages API (Anthropic) as sent, else bridged to the provider's chat
// translator, as the provider table decides (MessagesTranslator).
type messagesFlow struct {
	passAnswer
	version, beta string // the client's version and betas (anthropicVersionHeader, anthropicBetaHeader)
}

func (f messagesFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := f.permitted(ctx, st, body, false)
	if err != nil {
		return nil, err
	}
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		return p.MessagesTranslator(t, req)
	})
}

// permitted parses a Messages request (a token count's, count), routes
// its model and leaves out what the model's configuration does not
// permit.
func (f messagesFlow) permitted(ctx context.Context, st parser, body []byte, count bool) (*api.MessagesRequest, error) {
	req, err := api.ParseMessagesRequest(body, count)
	if err != nil {
		return nil, err
	}
	req.Version, req.Beta = f.version, f.beta
	if err := st.pick(ctx, req.Model); err != nil {
		return nil, err
	}
	r := st.request()
	req, left, err := req.Permitted(st.server().webSearch(r.model))
	if err != nil {
		return nil, err
	}
	r.warning = left.Warning()
	r.stream, r.maxOutput, r.searches = req.Stream, req.MaxTokens, req.WebSearchMaxUses()
	return req, nil
}

// countTokensFlow is POST /v1/messages/count_tokens: the provider's own
// count where every deployment of the model counts tokens itself, else
// the gateway's estimate, which it answers itself.
type countTokensFlow struct{ messagesFlow }

func (f countTokensFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := f.permitted(ctx, st, body, true)
	if err != nil {
		return nil, err
	}
	if !st.server().countsTokens(req.Model) {
		n := promptEstimate(body)
		return &localAnswer{body: fmt.Appendf(nil, `{"input_tokens":%d}`, n), usage: translate.Usage{PromptTokens: n, TotalTokens: n}}, nil
	}
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if tr := p.CountTokens(t, req); tr != nil {
			return tr, nil
		}
		return nil, errInternal(fmt.Errorf("provider %s counts no tokens of %s", t.Provider, t.Model))
	})
}

// webSearch reports whether the model may search the web with its
// provider's own search: what the model's requests are permitted beyond
// answering (api.LeftOut).
func (s *Server) webSearch(model string) bool {
	m, ok := s.router.models[model]
	return ok && m.WebSearch
}

// countsTokens reports whether every deployment of the model is on a
// provider that counts its tokens itself (Anthropic; Claude on Bedrock):
// the gateway estimates the others' counts itself, before routing
// (whichever deployment a Fallback model's attempts reach).
func (s *Server) countsTokens(model string) bool {
	m, ok := s.router.models[model]
	if !ok {
		return false
	}
	for _, d := range m.Deployments {
		if !s.providers[s.router.backends[d.Backend].Provider].CountsTokens(d.Model) {
			return false
		}
	}
	return true
}

// localAnswer is the gateway's own answer to a request it parsed, given
// without a provider: a count_tokens estimate, which its flow's parse
// returns. It is the exchange's translator (exchange.routeBody), whose
// usage is what the answer stands for once it is given.
type localAnswer struct {
	body             []byte
	usage            translate.Usage
	translate.NoText // a count, no generated text
}

// RequestBody implements translate.Translator: nothing goes to a
// provider.
func (l *localAnswer) RequestBody() (translate.Upstream, error) {
	return translate.Upstream{}, errInternal(errors.New("the gateway answers this request itself"))
}

// ResponseHeaders implements translate.Translator.
func (*localAnswer) ResponseHeaders(int, string) translate.Head {
	return translate.Head{Status: http.StatusOK, ContentType: "application/json"}
}

// ResponseBody implements translate.Translator.
func (l *localAnswer) ResponseBody([]byte, bool) ([]byte, error) { return l.body, nil }

// Usage implements translate.Translator.
func (l *localAnswer) Usage() translate.Usage { return l.usage }

// price is what prices count of a token count: nothing, as every
// provider counts free of charge (its tokens are charged to token limits
// only).
func (countTokensFlow) price(pricing.Usage, bool) pricing.Usage { return pricing.Usage{} }

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
