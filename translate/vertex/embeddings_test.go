package vertex

import (
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

func TestEmbeddingsRequestAndUsage(t *testing.T) {
	req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":["a","b"],"dimensions":64}`))
	if err != nil {
		t.Fatal(err)
	}
	tr := NewEmbeddings(translate.Target{Model: "text-embedding-005", Project: "my proj", BasePath: "/p", APIKey: "tok"}, req)
	up, err := tr.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	wantPath := "/p/v1/projects/my%20proj/locations/global/publishers/google/models/text-embedding-005:predict"
	wantBody := `{"instances":[{"content":"a"},{"content":"b"}],"parameters":{"outputDimensionality":64}}`
	if up.Path != wantPath || string(up.Body) != wantBody || len(up.Headers) != 2 || up.Headers[1].Value != "Bearer tok" {
		t.Errorf("got %s %s %v", up.Path, up.Body, up.Headers)
	}
	tr.ResponseHeaders(200, "application/json")
	// token_count may come as 6.0; a missing statistics counts as zero.
	_, err = tr.ResponseBody([]byte(`{"predictions":[{"embeddings":{"statistics":{"token_count":6.0},"values":[1]}},{"embeddings":{"values":[2]}}]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if u := tr.Usage(); u.PromptTokens != 6 || u.TotalTokens != 6 {
		t.Errorf("usage = %+v", u)
	}
	if _, err := tr.ResponseBody([]byte(`{"error":"x"}`), true); err == nil {
		t.Error("a body without predictions: no error")
	}
}
