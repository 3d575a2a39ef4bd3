package bedrock

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Embeddings use InvokeModel (/model/{id}/invoke) with the model's own
// body, for two families:
//
//   - Amazon Titan Text Embeddings: one input per call; v2 takes
//     dimensions 256, 512 or 1024, v1 cannot shorten. Usage is
//     inputTextTokenCount.
//   - Cohere Embed: up to 96 texts per call, input_type search_document
//     (OpenAI's API has no notion of query and document embeddings); v4
//     takes output_dimension 256, 512, 1024 or 1536, v3 cannot shorten.
//     Bedrock reports Cohere's token count only in a response header the
//     translator does not see, so usage is the gateway's estimate of one
//     token per four characters (api.EstimateEmbeddingTokens), the rule
//     of thumb Bedrock's Cohere documentation gives.
//
// Other models, including those named only by an ARN, are a 400.

// embedFamily is the body format of a Bedrock embedding model.
type embedFamily int

const (
	embedUnknown embedFamily = iota
	embedTitanV1
	embedTitanV2
	embedCohereV3
	embedCohereV4
)

func embedFamilyOf(model string) embedFamily {
	switch {
	case strings.Contains(model, "amazon.titan-embed-text-v2"):
		return embedTitanV2
	case strings.Contains(model, "amazon.titan-embed-text-v1"), strings.Contains(model, "amazon.titan-embed-g1-text"):
		return embedTitanV1
	case strings.Contains(model, "cohere.embed-v4"):
		return embedCohereV4
	case strings.Contains(model, "cohere.embed-"):
		return embedCohereV3
	}
	return embedUnknown
}

// maxCohereTexts is Cohere Embed's limit on texts per call on Bedrock.
const maxCohereTexts = 96

type embeddings struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.EmbeddingsRequest
	now              func() time.Time
	family           embedFamily
	status           int
	usage            translate.Usage
}

// NewEmbeddings returns the embeddings translator for provider bedrock.
// Like chat, it sends a Bedrock API key as a bearer token and otherwise
// signs with SigV4.
func NewEmbeddings(t translate.Target, req *api.EmbeddingsRequest) translate.Translator {
	return &embeddings{target: t, req: req, now: time.Now, family: embedFamilyOf(t.Model)}
}

type titanRequest struct {
	InputText  string `json:"inputText"`
	Dimensions int    `json:"dimensions,omitempty"`
}

type cohereRequest struct {
	Texts           []string `json:"texts"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	OutputDimension int      `json:"output_dimension,omitempty"`
}

// RequestBody builds the model's InvokeModel request.
func (e *embeddings) RequestBody() (translate.Upstream, error) {
	body, err := e.body()
	if err != nil {
		return translate.Upstream{}, err
	}
	return upstream(e.target, "invoke", body, e.now()), nil
}

func (e *embeddings) body() ([]byte, error) {
	dims := e.req.Dimensions
	switch e.family {
	case embedTitanV1, embedTitanV2:
		texts, err := e.req.TextInputs("Amazon Titan", 1)
		if err != nil {
			return nil, err
		}
		switch {
		case dims == 0:
		case e.family == embedTitanV1:
			return nil, api.DimensionsUnsupported()
		case !slices.Contains([]int{256, 512, 1024}, dims):
			return nil, api.Invalid("dimensions", "Invalid 'dimensions': %d. This model takes 256, 512 or 1024.", dims)
		}
		return json.Marshal(titanRequest{InputText: texts[0], Dimensions: dims})
	case embedCohereV3, embedCohereV4:
		texts, err := e.req.TextInputs("Cohere", maxCohereTexts)
		if err != nil {
			return nil, err
		}
		switch {
		case dims == 0:
		case e.family == embedCohereV3:
			return nil, api.DimensionsUnsupported()
		case !slices.Contains([]int{256, 512, 1024, 1536}, dims):
			return nil, api.Invalid("dimensions", "Invalid 'dimensions': %d. This model takes 256, 512, 1024 or 1536.", dims)
		}
		return json.Marshal(cohereRequest{Texts: texts, InputType: "search_document", EmbeddingTypes: []string{"float"}, OutputDimension: dims})
	}
	return nil, api.Invalid("model", "The gateway can call Amazon Titan Text Embeddings and Cohere Embed models on Bedrock for embeddings; this model is neither.")
}

// ResponseHeaders implements translate.Translator.
func (e *embeddings) ResponseHeaders(status int, contentType string) translate.Head {
	e.status = status
	return translate.Head{Status: clientStatus(status), ContentType: "application/json"}
}

var errNotEmbedding = api.Unusable("the provider's response is not an InvokeModel embeddings response")

// ResponseBody turns the model's response into a CreateEmbeddingResponse.
// A body that is none is an error wrapping translate.ErrUpstream.
func (e *embeddings) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if e.status/100 != 2 {
		return errorBody(e.status, chunk), nil
	}
	var vectors []json.RawMessage
	if e.family == embedTitanV1 || e.family == embedTitanV2 {
		var r struct {
			Embedding           json.RawMessage `json:"embedding"`
			InputTextTokenCount int64           `json:"inputTextTokenCount"`
		}
		if err := api.DecodeUpstream(chunk, &r, "embeddings response"); err != nil {
			return nil, err
		}
		if r.Embedding == nil {
			return nil, errNotEmbedding
		}
		vectors = []json.RawMessage{r.Embedding}
		e.usage = translate.Usage{PromptTokens: r.InputTextTokenCount, TotalTokens: r.InputTextTokenCount}
	} else {
		// embeddings is {"float": [...]} when embedding_types was sent (it
		// always is), a plain array of vectors otherwise.
		var r struct {
			Embeddings json.RawMessage `json:"embeddings"`
		}
		if err := api.DecodeUpstream(chunk, &r, "embeddings response"); err != nil {
			return nil, err
		}
		var byType struct {
			Float []json.RawMessage `json:"float"`
		}
		if json.Unmarshal(r.Embeddings, &vectors) != nil {
			if err := json.Unmarshal(r.Embeddings, &byType); err != nil {
				return nil, errNotEmbedding
			}
			vectors = byType.Float
		}
	}
	if e.usage.PromptTokens <= 0 {
		n := api.EstimateEmbeddingTokens(e.req.Texts)
		e.usage = translate.Usage{PromptTokens: n, TotalTokens: n}
	}
	return e.req.Response(vectors, e.usage)
}

// Usage implements translate.Translator.
func (e *embeddings) Usage() translate.Usage { return e.usage }

var _ translate.Reporter = (*embeddings)(nil)
