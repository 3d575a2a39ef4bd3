package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
)

// embeddings translates embeddings for servers that speak the OpenAI API.
type embeddings struct {
	translate.NoText // generates no text
	target           translate.Target
	req              *api.EmbeddingsRequest
	quirks           EmbeddingsQuirks
	status           int
	usage            translate.Usage
}

// EmbeddingsQuirks are the ways an OpenAI-compatible server's
// /v1/embeddings departs from OpenAI's.
type EmbeddingsQuirks struct {
	// Base64 means the server encodes base64 vectors itself. Otherwise the
	// gateway asks for floats and encodes them.
	Base64 bool
	// DimensionsName is the member that takes dimensions (Mistral's
	// output_dimension); empty keeps OpenAI's name.
	DimensionsName string
	// FixedSize lists model name prefixes whose vectors cannot be
	// shortened: dimensions is a 400 for them.
	FixedSize []string
	// TextOnly means the server takes no token-id input.
	TextOnly bool
	// Drop lists request members the server rejects.
	Drop []string
}

// mistralEmbeddings follow Mistral's EmbeddingRequest (its OpenAPI
// document): encoding_format, output_dimension (codestral-embed;
// mistral-embed vectors are fixed at 1024), text input only, and no
// members beyond its own.
var mistralEmbeddings = EmbeddingsQuirks{Base64: true, DimensionsName: "output_dimension", FixedSize: []string{"mistral-embed"},
	TextOnly: true, Drop: []string{"user"}}

// NewEmbeddings returns the embeddings translator for provider openai.
func NewEmbeddings(t translate.Target, req *api.EmbeddingsRequest) translate.Translator {
	return &embeddings{target: t, req: req, quirks: EmbeddingsQuirks{Base64: true}}
}

// NewCompatibleEmbeddings returns the embeddings translator constructor for
// an OpenAI-compatible server with these quirks.
func NewCompatibleEmbeddings(q Quirks) func(translate.Target, *api.EmbeddingsRequest) translate.Translator {
	return func(t translate.Target, req *api.EmbeddingsRequest) translate.Translator {
		return &embeddings{target: t, req: req, quirks: q.Embeddings}
	}
}

// RequestBody passes the request on with the upstream model and the
// server's quirks applied.
func (e *embeddings) RequestBody() (translate.Upstream, error) {
	q := e.quirks
	if q.TextOnly && e.req.Tokens {
		return translate.Upstream{}, api.Invalid("input", "This provider's embedding models take text only; send 'input' as a string or an array of strings, not token ids.")
	}
	members := make(map[string]json.RawMessage, len(e.req.Members))
	for k, v := range e.req.Members {
		members[k] = v
	}
	for _, name := range q.Drop {
		delete(members, name)
	}
	model, err := json.Marshal(e.target.Model)
	if err != nil {
		return translate.Upstream{}, err
	}
	members["model"] = model
	if e.req.Base64 && !q.Base64 {
		delete(members, "encoding_format")
	}
	if e.req.Dimensions > 0 {
		for _, prefix := range q.FixedSize {
			if strings.HasPrefix(e.target.Model, prefix) {
				return translate.Upstream{}, api.DimensionsUnsupported()
			}
		}
		if q.DimensionsName != "" {
			members[q.DimensionsName] = members["dimensions"]
			delete(members, "dimensions")
		}
	}
	body, err := json.Marshal(members)
	if err != nil {
		return translate.Upstream{}, fmt.Errorf("encoding upstream request: %w", err)
	}
	return upstream(e.target, "/v1/embeddings", "application/json", body), nil
}

// ResponseHeaders implements translate.Translator; embeddings are never
// streamed.
func (e *embeddings) ResponseHeaders(status int, contentType string) translate.Head {
	e.status = status
	return translate.Head{Status: api.ClientStatus(status), ContentType: "application/json"}
}

// ResponseBody implements translate.Translator.
func (e *embeddings) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if e.status/100 != 2 {
		return api.ProviderError(e.status, chunk), nil
	}
	out, err := e.response(chunk)
	return out, api.AsUnusable(err)
}

// Usage implements translate.Translator.
func (e *embeddings) Usage() translate.Usage { return e.usage }

// openaiEmbeddings is CreateEmbeddingResponse as the gateway reads it.
type openaiEmbeddings struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage *struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// response passes a valid response through as sent, but for its model,
// which is the one the client asked for whatever id the server names.
// One the gateway must change more is rendered anew: vectors in the
// other encoding (the gateway encodes base64 for servers that cannot, and
// decodes it for a server that ignored encoding_format "float"), or
// required members missing. Without a count from the server, usage is the
// token ids sent, or the estimate for text.
func (e *embeddings) response(body []byte) ([]byte, error) {
	var r openaiEmbeddings
	if err := api.DecodeUpstream(body, &r, "embeddings response"); err != nil {
		return nil, err
	}
	if r.Data == nil {
		return nil, api.Unusable("the provider's embeddings response has no data array")
	}
	if r.Usage != nil {
		e.usage = translate.Usage{PromptTokens: r.Usage.PromptTokens, TotalTokens: max(r.Usage.TotalTokens, r.Usage.PromptTokens)}
	}
	if e.usage.PromptTokens <= 0 { // a server that counts nothing
		n := e.req.TokenCount
		if n == 0 {
			n = api.EstimateEmbeddingTokens(e.req.Texts)
		}
		e.usage = translate.Usage{PromptTokens: n, TotalTokens: n}
	}
	keep := r.Object == "list" && r.Model != "" && r.Usage != nil && r.Usage.PromptTokens > 0
	vectors := make([]json.RawMessage, len(r.Data))
	for i, d := range r.Data {
		emb := jsonscan.TrimSpace(d.Embedding)
		isString, isArray := len(emb) > 0 && emb[0] == '"', len(emb) > 0 && emb[0] == '['
		keep = keep && d.Object == "embedding" && d.Index != nil && *d.Index == i && (isString && e.req.Base64 || isArray && !e.req.Base64)
		vectors[i] = d.Embedding
	}
	if keep && r.Model == e.req.Model {
		return body, nil
	}
	if keep {
		// The model member as decoded; a key of another case or
		// spelling that encoding/json took for it is rendered anew.
		if out, changed := jsonscan.SetString(body, jsonscan.SkipSpace(body, 0), "model", e.req.Model); changed {
			return out, nil
		}
	}
	return api.AppendEmbeddingsResponse(make([]byte, 0, len(body)+256), e.req.Model, vectors, e.req.Base64, e.usage)
}

var _ translate.Reporter = (*embeddings)(nil)
