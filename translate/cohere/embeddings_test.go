package cohere

import (
	"errors"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

func TestEmbedDimensions(t *testing.T) {
	tests := []struct {
		model string
		dims  int
		ok    bool
	}{
		{"embed-v4.0", 0, true},
		{"embed-v4.0", 256, true},
		{"embed-v4.0", 1536, true},
		{"embed-v4.0", 300, false},
		{"embed-english-v3.0", 256, false},
		{"embed-multilingual-light-v3.0", 384, false},
		{"embed-english-v2.0", 256, false},
		{"a-fine-tuned-model", 300, true},
	}
	for _, tt := range tests {
		err := checkDimensions(tt.model, tt.dims)
		var re *api.RequestError
		if tt.ok != (err == nil) || err != nil && (!errors.As(err, &re) || re.Param != "dimensions" || re.Code != "invalid_value") {
			t.Errorf("checkDimensions(%s, %d) = %v", tt.model, tt.dims, err)
		}
	}
}

// Without billed units the usage is the gateway's estimate, never zero.
func TestEmbedUsage(t *testing.T) {
	req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":["abcdefgh","a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]int64{
		`{"embeddings":{"float":[[1],[2]]},"meta":{"billed_units":{"input_tokens":7}}}`: 7,
		`{"embeddings":{"float":[[1],[2]]}}`:                                            3,
	} {
		tr := NewEmbeddings(translate.Target{Model: "embed-v4.0"}, req)
		if _, err := tr.RequestBody(); err != nil {
			t.Fatal(err)
		}
		tr.ResponseHeaders(200, "application/json")
		if _, err := tr.ResponseBody([]byte(body), true); err != nil {
			t.Fatal(err)
		}
		if u := tr.Usage(); u.PromptTokens != want || u.TotalTokens != want {
			t.Errorf("%s: usage %+v, want %d", body, u, want)
		}
	}
}
