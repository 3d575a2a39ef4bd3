package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
)

// MaxEmbeddingInputs is OpenAI's limit on inputs per embeddings request.
const MaxEmbeddingInputs = 2048

// EmbeddingsRequest is a validated CreateEmbeddingRequest. Translators to
// other wire formats read Texts; servers that speak the OpenAI API get
// Members back as sent.
type EmbeddingsRequest struct {
	Model string
	// Texts are the inputs in order when they are text; nil for token
	// arrays.
	Texts []string
	// Tokens is set when the input is token ids: an array of integers (one
	// input) or an array of integer arrays.
	Tokens bool
	// Base64 is encoding_format "base64": each vector is the standard
	// base64 of its little-endian float32 values.
	Base64 bool
	// Dimensions is the requested vector length; 0 when not set.
	Dimensions int
	// Members are the request's top-level members as sent.
	Members map[string]json.RawMessage

	TokenCount int64 // the token ids of token input
}

// ParseEmbeddingsRequest validates a CreateEmbeddingRequest body. Errors
// are *RequestError.
func ParseEmbeddingsRequest(body []byte) (*EmbeddingsRequest, error) {
	m, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	r := &EmbeddingsRequest{Members: m}
	checks := []func() error{
		func() (err error) { r.Model, err = requiredString(m, "model"); return err },
		r.parseInput,
		r.parseEncodingFormat,
		r.parseDimensions,
		func() error { return optionalString(m, "user") },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

const embeddingInputKinds = "a string, an array of strings, an array of integers or an array of integer arrays"

func (r *EmbeddingsRequest) parseInput() error {
	raw := r.Members["input"]
	if jsonscan.IsNull(raw) {
		return missing("input")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return invalidValue("input", "empty string. The input must not be an empty string.")
		}
		r.Texts = []string{s}
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return wrongType("input", embeddingInputKinds, raw)
	}
	switch {
	case len(items) == 0:
		return invalidValue("input", "empty array. Expected an array with minimum length 1, but got an empty array instead.")
	case len(items) > MaxEmbeddingInputs:
		return invalidValue("input", "array too long. Expected an array with maximum length %d, but got an array with length %d instead.",
			MaxEmbeddingInputs, len(items))
	}
	switch first := bytes.TrimSpace(items[0]); {
	case first[0] == '"':
		return r.textInputs(raw)
	case first[0] == '[':
		r.Tokens = true
		var arrays [][]int64
		if json.Unmarshal(raw, &arrays) != nil {
			return wrongType("input", embeddingInputKinds, raw)
		}
		for i, a := range arrays {
			if len(a) == 0 {
				return invalidValue("input", "input[%d] is an empty array; token arrays must hold at least one token.", i)
			}
			if err := tokenIDs(a); err != nil {
				return err
			}
			r.TokenCount += int64(len(a))
		}
		return nil
	}
	r.Tokens = true
	var ids []int64
	if json.Unmarshal(raw, &ids) != nil {
		return wrongType("input", embeddingInputKinds, raw)
	}
	r.TokenCount = int64(len(ids))
	return tokenIDs(ids)
}

func (r *EmbeddingsRequest) textInputs(raw json.RawMessage) error {
	if json.Unmarshal(raw, &r.Texts) != nil {
		return wrongType("input", embeddingInputKinds, raw)
	}
	for i, t := range r.Texts {
		if t == "" {
			return invalidValue("input", "input[%d] is an empty string. Inputs must not be empty strings.", i)
		}
	}
	return nil
}

func tokenIDs(ids []int64) error {
	for _, id := range ids {
		if id < 0 {
			return invalidValue("input", "token ids must not be negative, got %d.", id)
		}
	}
	return nil
}

func (r *EmbeddingsRequest) parseEncodingFormat() error {
	raw := r.Members["encoding_format"]
	if jsonscan.IsNull(raw) {
		return nil
	}
	var f string
	if json.Unmarshal(raw, &f) != nil {
		return wrongType("encoding_format", "a string", raw)
	}
	switch f {
	case "float":
	case "base64":
		r.Base64 = true
	default:
		return invalidValue("encoding_format", "'%s'. Supported values are: 'float' and 'base64'.", f)
	}
	return nil
}

func (r *EmbeddingsRequest) parseDimensions() error {
	if err := integerIn(r.Members, "dimensions", 1, 1<<31-1); err != nil {
		return err
	}
	if raw := r.Members["dimensions"]; !jsonscan.IsNull(raw) {
		return json.Unmarshal(raw, &r.Dimensions)
	}
	return nil
}

func optionalString(m map[string]json.RawMessage, name string) error {
	var s string
	if raw := m[name]; !jsonscan.IsNull(raw) && json.Unmarshal(raw, &s) != nil {
		return wrongType(name, "a string", raw)
	}
	return nil
}

// TextInputs returns the texts for a provider that takes text only, at
// most limit inputs per request. provider names it in the client's error.
func (r *EmbeddingsRequest) TextInputs(provider string, limit int) ([]string, error) {
	if r.Tokens {
		return nil, Invalid("input", "%s embedding models take text only; send 'input' as a string or an array of strings, not token ids.", provider)
	}
	if len(r.Texts) > limit {
		if limit == 1 {
			return nil, Invalid("input", "This %s embedding model takes one input per request, but the request has %d; send them one at a time.", provider, len(r.Texts))
		}
		return nil, Invalid("input", "%s embedding models take at most %d inputs per request, but the request has %d; split it into smaller batches.",
			provider, limit, len(r.Texts))
	}
	return r.Texts, nil
}

// DimensionsUnsupported is the 400 for a model whose vectors have one
// fixed length.
func DimensionsUnsupported() error {
	return Invalid("dimensions", "This model does not support specifying dimensions.")
}

// EstimateEmbeddingTokens estimates the tokens of texts at one per four
// characters (at least one per text), the rule of thumb providers
// document, for providers that report no count.
func EstimateEmbeddingTokens(texts []string) int64 {
	var n int64
	for _, t := range texts {
		n += int64(max(1, (utf8.RuneCountInString(t)+3)/4))
	}
	return n
}

// Response renders the CreateEmbeddingResponse of a translated provider:
// vectors are its JSON arrays of numbers, one per input in input order.
// Vectors that are not (or too few or many) are an error wrapping
// translate.ErrUpstream. Its model is r's, the one the client asked for,
// whatever id the provider knows it by.
func (r *EmbeddingsRequest) Response(vectors []json.RawMessage, u translate.Usage) ([]byte, error) {
	if len(vectors) != len(r.Texts) {
		return nil, Unusable(fmt.Sprintf("the provider returned %d embeddings for %d inputs", len(vectors), len(r.Texts)))
	}
	size := 256
	for _, v := range vectors {
		size += len(v) + 64
	}
	out, err := AppendEmbeddingsResponse(make([]byte, 0, size), r.Model, vectors, r.Base64, u)
	return out, AsUnusable(err)
}
