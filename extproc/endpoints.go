package extproc

import (
	"context"
	"fmt"
	"net/http"

	"modelgate/translate/api"
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
	newTr := ex.provider.Embeddings
	if newTr == nil {
		return errEndpointNotSupported(req.Model, ex.endpoint)
	}
	ex.tr = newTr(ex.target, req)
	return nil
}

func (ex *exchange) translateImages(ctx context.Context, body []byte) error {
	req, err := api.ParseImagesRequest(body)
	if err != nil {
		return err
	}
	if err := ex.pick(ctx, req.Model); err != nil {
		return err
	}
	newTr := ex.provider.Images
	if newTr == nil {
		return errEndpointNotSupported(req.Model, ex.endpoint)
	}
	ex.imgReq = req
	ex.tr = newTr(ex.target, req)
	return nil
}

func (ex *exchange) translateTranscription(ctx context.Context, body []byte) error {
	req, err := api.ParseTranscriptionRequest(ex.contentType, body)
	if err != nil {
		return err
	}
	if err := ex.pick(ctx, req.Model); err != nil {
		return err
	}
	newTr := ex.provider.Transcription
	if newTr == nil {
		return errEndpointNotSupported(req.Model, ex.endpoint)
	}
	ex.tr = newTr(ex.target, req)
	return nil
}
