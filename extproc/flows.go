package extproc

import (
	"context"
	"fmt"
	"modelgate/authz/pricing"
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/providers"
	"net/http"
)

// passAnswer is the answer and prices of the flows that add nothing.
type passAnswer struct{}

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

// price is what prices count of a token count: nothing, as every
// provider counts free of charge (its tokens are charged to token limits
// only).
func (countTokensFlow) price(pricing.Usage, bool) pricing.Usage { return pricing.Usage{} }

// newFlow makes the flow of a request to ep that reaches a provider;
// false for the endpoints the gateway answers itself.
func newFlow(ep endpoint, s *Server, hm headerMap) (flow, bool) {
	switch ep {
	case endpointChat:
		return chatFlow{}, true
	case endpointResponses:
		return &responsesFlow{}, true
	case endpointCompact:
		return compactFlow{}, true
	case endpointEmbeddings:
		return embeddingsFlow{}, true
	case endpointImages:
		return &imagesFlow{publicBase: s.publicBase(hm)}, true
	case endpointTranscriptions:
		return transcriptionFlow{}, true
	case endpointMessages:
		return messagesFlow{version: hm.get(anthropicVersionHeader), beta: hm.get(anthropicBetaHeader)}, true
	case endpointCountTokens:
		return countTokensFlow{messagesFlow{version: hm.get(anthropicVersionHeader), beta: hm.get(anthropicBetaHeader)}}, true
	}
	return nil, false
}
