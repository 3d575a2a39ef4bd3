package cohere

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Embeddings go to the v2 Embed API (POST /v2/embed) as float embeddings
// of up to 96 texts, with input_type search_document (OpenAI's API has no
// notion of query and document embeddings). dimensions is
// output_dimension, which embed-v4 models take as 256, 512, 1024 or 1536;
// v2 and v3 models cannot shorten. Usage is meta.billed_units.input_tokens.

// MaxEmbedTexts is the Embed API's limit on texts per call.
const MaxEmbedTexts = 96

type embeddings struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.EmbeddingsRequest
	status           int
	usage            translate.Usage
}

// NewEmbeddings returns the embeddings translator for provider cohere.
func NewEmbeddings(t translate.Target, req *api.EmbeddingsRequest) translate.Translator {
	return &embeddings{target: t, req: req}
}

type embedRequest struct {
	Model           string   `json:"model"`
	Texts           []string `json:"texts"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	OutputDimension int      `json:"output_dimension,omitempty"`
}

// RequestBody builds the v2 embed request.
func (e *embeddings) RequestBody() (translate.Upstream, error) {
	texts, err := e.req.TextInputs("Cohere", MaxEmbedTexts)
	if err != nil {
		return translate.Upstream{}, err
	}
	if err := checkDimensions(e.target.Model, e.req.Dimensions); err != nil {
		return translate.Upstream{}, err
	}
	body, err := json.Marshal(embedRequest{Model: e.target.Model, Texts: texts, InputType: "search_document",
		EmbeddingTypes: []string{"float"}, OutputDimension: e.req.Dimensions})
	if err != nil {
		return translate.Upstream{}, err
	}
	headers := []translate.Header{{Name: "content-type", Value: "application/json"}}
	if e.target.APIKey != "" {
		headers = append(headers, translate.Header{Name: "authorization", Value: "Bearer " + e.target.APIKey})
	}
	return translate.Upstream{Body: body, Path: e.target.BasePath + "/v2/embed", Headers: headers}, nil
}

// checkDimensions: output_dimension is for embed-v4 models and newer;
// the v2 and v3 models have one vector length.
func checkDimensions(model string, dims int) error {
	switch {
	case dims == 0:
	case strings.Contains(model, "-v2.") || strings.Contains(model, "-v3."):
		return api.DimensionsUnsupported()
	case strings.HasPrefix(model, "embed-v4") && !slices.Contains([]int{256, 512, 1024, 1536}, dims):
		return api.Invalid("dimensions", "Invalid 'dimensions': %d. This model takes 256, 512, 1024 or 1536.", dims)
	}
	return nil
}

// ResponseHeaders implements translate.Translator.
func (e *embeddings) ResponseHeaders(status int, contentType string) translate.Head {
	e.status = status
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return translate.Head{Status: http.StatusBadGateway, ContentType: "application/json"}
	}
	return translate.Head{Status: status, ContentType: "application/json"}
}

// ResponseBody turns the embed response into a CreateEmbeddingResponse. A
// body that is none is an error wrapping translate.ErrUpstream.
func (e *embeddings) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if e.status/100 != 2 {
		return errorBody(e.status, chunk), nil
	}
	var r struct {
		Embeddings struct {
			Float []json.RawMessage `json:"float"`
		} `json:"embeddings"`
		Meta struct {
			BilledUnits struct {
				InputTokens float64 `json:"input_tokens"`
			} `json:"billed_units"`
		} `json:"meta"`
	}
	if err := api.DecodeUpstream(chunk, &r, "embed response"); err != nil {
		return nil, err
	}
	if r.Embeddings.Float == nil {
		return nil, api.Unusable("the provider's embed response has no float embeddings")
	}
	n := int64(r.Meta.BilledUnits.InputTokens)
	if n <= 0 {
		n = api.EstimateEmbeddingTokens(e.req.Texts)
	}
	e.usage = translate.Usage{PromptTokens: n, TotalTokens: n}
	return e.req.Response(r.Embeddings.Float, e.usage)
}

// Usage implements translate.Translator.
func (e *embeddings) Usage() translate.Usage { return e.usage }

var _ translate.Reporter = (*embeddings)(nil)
