package extproc

import (
	"context"
	"fmt"
	"net/http"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/azure"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/vertex"
)

type (
	embeddingsFactory    func(translate.Target, *api.EmbeddingsRequest) translate.Translator
	imagesFactory        func(translate.Target, *api.ImagesRequest) translate.Translator
	transcriptionFactory func(translate.Target, *api.TranscriptionRequest) translate.Translator
)

// factories is the (endpoint, provider) → translator table for the
// endpoints beside chat. A provider missing from an endpoint's map does
// not serve it.
type factories struct {
	embeddings    map[string]embeddingsFactory
	images        map[string]imagesFactory
	transcription map[string]transcriptionFactory
}

func newFactories() factories {
	f := factories{
		embeddings: map[string]embeddingsFactory{
			"openai":  openai.NewEmbeddings,
			"azure":   azure.NewEmbeddings,
			"gemini":  gemini.NewEmbeddings,
			"vertex":  vertex.NewEmbeddings,
			"bedrock": bedrock.NewEmbeddings,
			"cohere":  cohere.NewEmbeddings,
		},
		images: map[string]imagesFactory{
			"openai":  openai.NewImages,
			"azure":   azure.NewImages,
			"gemini":  gemini.NewImages,
			"vertex":  vertex.NewImages,
			"bedrock": bedrock.NewImages,
		},
		transcription: map[string]transcriptionFactory{
			"openai": openai.NewTranscription,
			"azure":  azure.NewTranscription,
		},
	}
	for name, quirks := range openai.CompatibleProviders() {
		f.embeddings[name] = openai.NewCompatibleEmbeddings(quirks)
		f.transcription[name] = openai.NewTranscription
	}
	return f
}

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
	newTr, ok := ex.s.fx.embeddings[ex.target.Provider]
	if !ok {
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
	newTr, ok := ex.s.fx.images[ex.target.Provider]
	if !ok {
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
	newTr, ok := ex.s.fx.transcription[ex.target.Provider]
	if !ok {
		return errEndpointNotSupported(req.Model, ex.endpoint)
	}
	ex.tr = newTr(ex.target, req)
	return nil
}
