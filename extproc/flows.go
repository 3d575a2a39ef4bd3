package extproc

import (
	"context"
	"fmt"

	"modelgate/authz/pricing"
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/providers"
)

type chatFlow struct{ passAnswer }

func (chatFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := api.ParseChatRequest(body)
	if err != nil {
		return nil, err
	}
	if err := st.pick(ctx, req.Model, st.request().ask(body, asks{chat: req})); err != nil {
		return nil, err
	}
	r := st.request()
	req, left, err := req.Permitted(st.server().router.webSearch(r.model))
	if err != nil {
		return nil, err
	}
	if req, left, err = dropped(r, req, left, (*api.ChatRequest).Without, chatBody); err != nil {
		return nil, err
	}
	if st.server().guarded() {
		r.texts = func() []translate.RequestText { return api.ChatTexts(req) }
		r.maskTexts = func(m []string) []byte {
			api.MapChatTexts(req, inOrder(m))
			return bodyOr(req.Body, req.Members)
		}
	}
	r.warning = left.Warning()
	r.stream, r.maxOutput, r.answers = req.Stream, maxOutputTokens(req.Members), api.PositiveInteger(req.Members, "n")
	r.answerDialect, r.includeUsage = translate.Chat, req.IncludeUsage
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
	if err := st.pick(ctx, req.Model, st.request().ask(body, asks{})); err != nil {
		return nil, err
	}
	if st.server().guarded() {
		r := st.request()
		r.texts = func() []translate.RequestText { return api.EmbeddingsTexts(req) }
		r.maskTexts = func(m []string) []byte {
			api.MapEmbeddingsTexts(req, inOrder(m))
			return mustJSON(req.Members)
		}
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
	if err := st.pick(ctx, req.Model, nil); err != nil {
		return nil, err
	}
	st.request().answerDialect = translate.Transcription // response rules read what was heard
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Transcription == nil {
			return nil, errEndpointNotSupported(req.Model, endpointTranscriptions)
		}
		return p.Transcription(t, req), nil
	})
}

// messagesFlow is a Messages API request's: relayed to a provider of the
// Messages API (Anthropic) as sent, else bridged to the provider's chat
// translator, as the provider table decides (MessagesTranslator).
type messagesFlow struct {
	passAnswer
	version, beta string // the client's version and betas (anthropicVersionHeader, anthropicBetaHeader)
}

func (f messagesFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := f.routed(ctx, st, body, false)
	if err != nil {
		return nil, err
	}
	if req, err = permitted(st, req); err != nil {
		return nil, err
	}
	if st.server().guarded() {
		st.request().texts = func() []translate.RequestText { return api.MessagesTexts(req) }
		st.request().maskTexts = func(m []string) []byte {
			api.MapMessagesTexts(req, inOrder(m))
			return bodyOr(req.Body, req.Members)
		}
	}
	st.request().answerDialect = translate.Messages
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		return p.MessagesTranslator(t, req)
	})
}

// routed parses a Messages request (a token count's, count) with the
// client's version and betas, and routes its model.
func (f messagesFlow) routed(ctx context.Context, st parser, body []byte, count bool) (*api.MessagesRequest, error) {
	req, err := api.ParseMessagesRequest(body, count)
	if err != nil {
		return nil, err
	}
	req.Version, req.Beta = f.version, f.beta
	return req, st.pick(ctx, req.Model, st.request().ask(body, asks{messages: req}))
}

// permitted leaves out of a routed Messages request what the model's
// configuration does not permit and what its model drops, and notes what
// the request asks for.
func permitted(st parser, req *api.MessagesRequest) (*api.MessagesRequest, error) {
	r := st.request()
	req, left, err := req.Permitted(st.server().router.webSearch(r.model))
	if err != nil {
		return nil, err
	}
	if req, left, err = dropped(r, req, left, (*api.MessagesRequest).Without, messagesBody); err != nil {
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
	req, err := f.routed(ctx, st, body, true)
	if err != nil {
		return nil, err
	}
	if !st.server().router.countsTokens(st.request().model, st.server().providers) {
		n := promptEstimate(body)
		return &localAnswer{body: fmt.Appendf(nil, `{"input_tokens":%d}`, n), usage: translate.Usage{PromptTokens: n, TotalTokens: n}}, nil
	}
	if req, err = permitted(st, req); err != nil {
		return nil, err
	}
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if tr := p.CountTokens(t, req); tr != nil {
			return tr, nil
		}
		return nil, errInternal(fmt.Errorf("provider %s counts no tokens of %s", t.Provider, t.Model))
	})
}

// price is what prices count of a token count: nothing, as every
// provider counts free of charge (its tokens are charged to token limits
// only).
func (countTokensFlow) price(pricing.Usage, bool) pricing.Usage { return pricing.Usage{} }

// dropped serves req without what its model drops (request.drop): the
// request the provider gets, what it lost after left, and the body a
// Fallback model's router-level stream sends on (request.changedBody).
func dropped[R any](r *request, req R, left api.LeftOut, without func(R, []api.Capability) (R, api.LeftOut, error),
	body func(R) []byte) (R, api.LeftOut, error) {
	if len(r.drop) == 0 {
		return req, left, nil
	}
	out, lost, err := without(req, r.drop)
	if err != nil {
		return req, nil, err
	}
	r.changedBody = body(out)
	return out, append(left, lost...), nil
}

func chatBody(r *api.ChatRequest) []byte         { return bodyOr(r.Body, r.Members) }
func messagesBody(r *api.MessagesRequest) []byte { return bodyOr(r.Body, r.Members) }

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
