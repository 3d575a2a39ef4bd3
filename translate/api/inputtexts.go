package api

import (
	"encoding/json"

	"modelgate/translate"
)

// EmbeddingsTexts is the text of an embeddings request: each input, the
// user's (PartUser). Token ids are not text.
func EmbeddingsTexts(r *EmbeddingsRequest) []translate.RequestText {
	out := make([]translate.RequestText, 0, len(r.Texts))
	for _, t := range r.Texts {
		out = append(out, translate.RequestText{Part: translate.PartUser, Text: t})
	}
	return out
}

// MapEmbeddingsTexts replaces each input EmbeddingsTexts reads, in order,
// with what f returns, and reports whether any changed: the parsed
// inputs and the input member alike, a string still a string.
func MapEmbeddingsTexts(r *EmbeddingsRequest, f func(translate.RequestText) string) bool {
	changed := false
	for i, t := range r.Texts {
		if s := f(translate.RequestText{Part: translate.PartUser, Text: t}); s != t {
			r.Texts[i], changed = s, true
		}
	}
	if !changed {
		return false
	}
	var one string
	if json.Unmarshal(r.Members["input"], &one) == nil && len(r.Texts) == 1 {
		r.Members["input"] = mustMarshal(r.Texts[0])
	} else {
		r.Members["input"] = mustMarshal(r.Texts)
	}
	return true
}

// ImagesTexts is the text of an image generation request: its prompt,
// the user's (PartUser).
func ImagesTexts(r *ImagesRequest) []translate.RequestText {
	return []translate.RequestText{{Part: translate.PartUser, Text: r.Prompt}}
}

// MapImagesTexts replaces the prompt with what f returns, and reports
// whether it changed.
func MapImagesTexts(r *ImagesRequest, f func(translate.RequestText) string) bool {
	s := f(translate.RequestText{Part: translate.PartUser, Text: r.Prompt})
	if s == r.Prompt {
		return false
	}
	r.Prompt, r.Members["prompt"] = s, mustMarshal(s)
	return true
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // strings only
		panic(err)
	}
	return b
}
