package extproc

import (
	"context"
	"fmt"
	"net/http"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/providers"
)

// errEndpointNotSupported is a model whose provider does not serve the
// endpoint, such as embeddings from an Anthropic model.
func errEndpointNotSupported(model string, ep endpoint) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "model",
		Message: fmt.Sprintf("The model `%s` does not support %s.", quoted(model), ep)}
}

func (ex *exchange) translateEmbeddings(ctx context.Context, body []byte) error {
	req, err := api.ParseEmbeddingsRequest(body)
	if err != nil {
		return err
	}
	if err := ex.pick(ctx, req.Model); err != nil {
		return err
	}
	return ex.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Embeddings == nil {
			return nil, errEndpointNotSupported(req.Model, ex.req.endpoint)
		}
		return p.Embeddings(t, req), nil
	})
}

func (ex *exchange) translateImages(ctx context.Context, body []byte) error {
	req, err := api.ParseImagesRequest(body)
	if err != nil {
		return err
	}
	if err := ex.pick(ctx, req.Model); err != nil {
		return err
	}
	ex.ep.imgReq = req
	return ex.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Images == nil {
			return nil, errEndpointNotSupported(req.Model, ex.req.endpoint)
		}
		return p.Images(t, req), nil
	})
}

func (ex *exchange) translateTranscription(ctx context.Context, body []byte) error {
	req, err := api.ParseTranscriptionRequest(ex.req.contentType, body)
	if err != nil {
		return err
	}
	if err := ex.pick(ctx, req.Model); err != nil {
		return err
	}
	return ex.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Transcription == nil {
			return nil, errEndpointNotSupported(req.Model, ex.req.endpoint)
		}
		return p.Transcription(t, req), nil
	})
}

// serves reports whether a provider serves the endpoint, natively or (the
// Responses API) through its chat translator.
func serves(p providers.Provider, ep endpoint) bool {
	switch ep {
	case endpointEmbeddings:
		return p.Embeddings != nil
	case endpointImages:
		return p.Images != nil
	case endpointTranscriptions:
		return p.Transcription != nil
	}
	return p.Chat != nil
}
