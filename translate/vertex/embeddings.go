package vertex

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/gemini"
)

// Embeddings use the text embeddings API, :predict on a publishers/google
// model: each input is an instance, dimensions is
// parameters.outputDimensionality (Google's rules, gemini.CheckDimensions),
// and usage is the sum of the predictions' statistics.token_count. Vertex
// takes 250 inputs per request, gemini-embedding models one.

// MaxEmbeddingBatch is the text embeddings API's limit on instances.
const MaxEmbeddingBatch = 250

type embeddings struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.EmbeddingsRequest
	status           int
	usage            translate.Usage
}

// NewEmbeddings returns the embeddings translator for provider vertex.
func NewEmbeddings(t translate.Target, req *api.EmbeddingsRequest) translate.Translator {
	return &embeddings{target: t, req: req}
}

type predictRequest struct {
	Instances  []predictInstance `json:"instances"`
	Parameters *predictParams    `json:"parameters,omitempty"`
}

type predictInstance struct {
	Content string `json:"content"`
}

type predictParams struct {
	OutputDimensionality int `json:"outputDimensionality,omitempty"`
}

// RequestBody builds the predict request.
func (e *embeddings) RequestBody() (translate.Upstream, error) {
	limit := MaxEmbeddingBatch
	if strings.HasPrefix(e.target.Model, "gemini-embedding") {
		limit = 1
	}
	texts, err := e.req.TextInputs("Vertex AI", limit)
	if err != nil {
		return translate.Upstream{}, err
	}
	if err := gemini.CheckDimensions(e.target.Model, e.req.Dimensions); err != nil {
		return translate.Upstream{}, err
	}
	r := predictRequest{Instances: make([]predictInstance, len(texts))}
	for i, t := range texts {
		r.Instances[i].Content = t
	}
	if e.req.Dimensions > 0 {
		r.Parameters = &predictParams{OutputDimensionality: e.req.Dimensions}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return translate.Upstream{}, err
	}
	return address(translate.Upstream{Body: body}, e.target, "google", ":predict"), nil
}

// ResponseHeaders implements translate.Translator.
func (e *embeddings) ResponseHeaders(status int, contentType string) translate.Head {
	e.status = status
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return translate.Head{Status: http.StatusBadGateway, ContentType: "application/json"}
	}
	return translate.Head{Status: status, ContentType: "application/json"}
}

// ResponseBody turns the predictions into a CreateEmbeddingResponse. A
// body that is none is an error wrapping translate.ErrUpstream.
func (e *embeddings) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if e.status/100 != 2 {
		return gemini.ErrorBody(e.status, chunk), nil
	}
	var r struct {
		Predictions []struct {
			Embeddings struct {
				Statistics struct {
					// TokenCount is a JSON number that Vertex writes as 6.0 at times.
					TokenCount float64 `json:"token_count"`
				} `json:"statistics"`
				Values json.RawMessage `json:"values"`
			} `json:"embeddings"`
		} `json:"predictions"`
	}
	if err := api.DecodeUpstream(chunk, &r, "text embeddings response"); err != nil {
		return nil, err
	}
	if r.Predictions == nil {
		return nil, api.Unusable("the provider's text embeddings response has no predictions")
	}
	vectors := make([]json.RawMessage, len(r.Predictions))
	var tokens float64
	for i, p := range r.Predictions {
		vectors[i] = p.Embeddings.Values
		tokens += p.Embeddings.Statistics.TokenCount
	}
	n := int64(math.Round(tokens))
	if n <= 0 {
		n = api.EstimateEmbeddingTokens(e.req.Texts)
	}
	e.usage = translate.Usage{PromptTokens: n, TotalTokens: n}
	return e.req.Response(vectors, e.usage)
}

// Usage implements translate.Translator.
func (e *embeddings) Usage() translate.Usage { return e.usage }

var _ translate.Reporter = (*embeddings)(nil)
