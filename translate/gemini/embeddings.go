package gemini

import (
	"encoding/json"
	"net/http"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Embeddings go to embedContent for one input and batchEmbedContents for
// several (at most MaxEmbeddingBatch), with dimensions as
// outputDimensionality. The Gemini API reports no token counts for
// embeddings, so usage is the gateway's estimate of one token per four
// characters (api.EstimateEmbeddingTokens): an estimate rather than
// zero, so that keys are not charged nothing for them.

// MaxEmbeddingBatch is batchEmbedContents' limit on requests per call.
const MaxEmbeddingBatch = 100

type embeddings struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.EmbeddingsRequest
	status           int
	usage            translate.Usage
}

// NewEmbeddings returns the embeddings translator for provider gemini.
func NewEmbeddings(t translate.Target, req *api.EmbeddingsRequest) translate.Translator {
	return &embeddings{target: t, req: req}
}

type embedPart struct {
	Text string `json:"text"`
}

type embedContent struct {
	Parts []embedPart `json:"parts"`
}

// embedRequest is an EmbedContentRequest; Model is set inside a batch.
type embedRequest struct {
	Model                string       `json:"model,omitempty"`
	Content              embedContent `json:"content"`
	OutputDimensionality int          `json:"outputDimensionality,omitempty"`
}

// RequestBody builds embedContent or batchEmbedContents.
func (e *embeddings) RequestBody() (translate.Upstream, error) {
	texts, err := e.req.TextInputs("Gemini", MaxEmbeddingBatch)
	if err != nil {
		return translate.Upstream{}, err
	}
	if err := CheckDimensions(e.target.Model, e.req.Dimensions); err != nil {
		return translate.Upstream{}, err
	}
	method := ":embedContent"
	var body []byte
	if len(texts) == 1 {
		body, err = json.Marshal(embedRequest{Content: embedContent{Parts: []embedPart{{Text: texts[0]}}}, OutputDimensionality: e.req.Dimensions})
	} else {
		method = ":batchEmbedContents"
		batch := struct {
			Requests []embedRequest `json:"requests"`
		}{Requests: make([]embedRequest, len(texts))}
		for i, t := range texts {
			batch.Requests[i] = embedRequest{Model: "models/" + e.target.Model, Content: embedContent{Parts: []embedPart{{Text: t}}},
				OutputDimensionality: e.req.Dimensions}
		}
		body, err = json.Marshal(batch)
	}
	if err != nil {
		return translate.Upstream{}, err
	}
	return upstream(e.target, method, body), nil
}

// CheckDimensions applies Google's output dimensionality rules for an
// embedding model, on the Gemini API and on Vertex AI: gemini-embedding
// models take 128 to 3072, text-embedding-004/005 and
// text-multilingual-embedding-002 up to 768, embedding-001 cannot
// shorten. Other models are left to the provider.
func CheckDimensions(model string, dims int) error {
	model = strings.TrimPrefix(model, "models/")
	switch {
	case dims == 0:
		return nil
	case strings.HasPrefix(model, "embedding-001"):
		return api.DimensionsUnsupported()
	case strings.HasPrefix(model, "gemini-embedding") && (dims < 128 || dims > 3072):
		return api.Invalid("dimensions", "Invalid 'dimensions': %d. This model takes 128 to 3072 dimensions.", dims)
	case (strings.HasPrefix(model, "text-embedding-00") || strings.HasPrefix(model, "text-multilingual-embedding")) && dims > 768:
		return api.Invalid("dimensions", "Invalid 'dimensions': %d. This model takes at most 768 dimensions.", dims)
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

// contentEmbedding is a ContentEmbedding.
type contentEmbedding struct {
	Values json.RawMessage `json:"values"`
}

// ResponseBody turns EmbedContentResponse or BatchEmbedContentsResponse
// into a CreateEmbeddingResponse.
func (e *embeddings) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if e.status/100 != 2 {
		return errorBody(e.status, chunk), nil
	}
	var r struct {
		Embedding  *contentEmbedding  `json:"embedding"`
		Embeddings []contentEmbedding `json:"embeddings"`
	}
	if err := api.DecodeUpstream(chunk, &r, "embeddings response"); err != nil {
		return nil, err
	}
	if r.Embedding != nil {
		r.Embeddings = append(r.Embeddings, *r.Embedding)
	}
	vectors := make([]json.RawMessage, len(r.Embeddings))
	for i, emb := range r.Embeddings {
		vectors[i] = emb.Values
	}
	n := api.EstimateEmbeddingTokens(e.req.Texts)
	e.usage = translate.Usage{PromptTokens: n, TotalTokens: n}
	return e.req.Response(vectors, e.usage)
}

// Usage implements translate.Translator.
func (e *embeddings) Usage() translate.Usage { return e.usage }

// ErrorBody normalizes a Google API error ({"error":{"code","message",
// "status"}}), which Vertex AI shares.
func ErrorBody(status int, body []byte) []byte { return errorBody(status, body) }

var _ translate.Reporter = (*embeddings)(nil)
