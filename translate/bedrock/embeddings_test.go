package bedrock

import (
	"strings"
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
)

func TestEmbedFamily(t *testing.T) {
	for model, want := range map[string]embedFamily{
		"amazon.titan-embed-text-v2:0":                  embedTitanV2,
		"amazon.titan-embed-text-v1":                    embedTitanV1,
		"amazon.titan-embed-g1-text-02":                 embedTitanV1,
		"cohere.embed-english-v3":                       embedCohereV3,
		"cohere.embed-multilingual-v3":                  embedCohereV3,
		"cohere.embed-v4:0":                             embedCohereV4,
		"us.cohere.embed-v4:0":                          embedCohereV4,
		"amazon.titan-embed-image-v1":                   embedUnknown,
		"arn:aws:bedrock:us-east-1:1:inference-profile": embedUnknown,
	} {
		if got := embedFamilyOf(model); got != want {
			t.Errorf("%s: family %d, want %d", model, got, want)
		}
	}
}

// Without an API key the invoke request is signed like Converse.
func TestEmbeddingsSigned(t *testing.T) {
	req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":"hi","dimensions":512}`))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEmbeddings(translate.Target{Model: "amazon.titan-embed-text-v2:0", Host: "bedrock-runtime.eu-west-3.amazonaws.com",
		AWS: Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "TOKEN"}}, req).(*embeddings)
	e.now = func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }
	up, err := e.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	want := Sign(e.target.AWS, "eu-west-3", "POST", e.target.Host, up.Path, "application/json", up.Body, e.now())
	if up.Path != "/model/amazon.titan-embed-text-v2%3A0/invoke" || string(up.Body) != `{"inputText":"hi","dimensions":512}` ||
		len(up.Headers) != 1+len(want) || up.Headers[1] != want[0] || !strings.Contains(want[0].Value, "/eu-west-3/bedrock/aws4_request") {
		t.Errorf("got %s %s %v", up.Path, up.Body, up.Headers)
	}
}

func TestEmbeddingsBadResponses(t *testing.T) {
	for model, body := range map[string]string{
		"amazon.titan-embed-text-v2:0": `{"inputTextTokenCount":3}`,
		"cohere.embed-english-v3":      `{"embeddings":{"int8":[[1]]}}`,
	} {
		req, _ := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":"hi"}`))
		tr := NewEmbeddings(translate.Target{Model: model, APIKey: "k"}, req)
		if _, err := tr.RequestBody(); err != nil {
			t.Fatal(err)
		}
		tr.ResponseHeaders(200, "application/json")
		if out, err := tr.ResponseBody([]byte(body), true); err == nil {
			t.Errorf("%s: %s gave %s", model, body, out)
		}
	}
}
