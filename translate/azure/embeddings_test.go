package azure

import (
	"bytes"
	"os"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

func TestEmbeddings(t *testing.T) {
	req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":"How do I reset my password?","encoding_format":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	tr := NewEmbeddings(translate.Target{Model: "my deployment", APIKey: "azure-key", BasePath: "/prefix", APIVersion: "2024-12-01-preview"}, req)
	up, err := tr.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	if up.Path != "/prefix/openai/deployments/my%20deployment/embeddings?api-version=2024-12-01-preview" ||
		string(up.Body) != `{"encoding_format":"base64","input":"How do I reset my password?","model":"my deployment"}` {
		t.Errorf("got %s %s", up.Path, up.Body)
	}
	for _, h := range up.Headers {
		if h.Name == "authorization" || h.Name == "api-key" && h.Value != "azure-key" {
			t.Errorf("header %v", h)
		}
	}
	recorded, err := os.ReadFile("../../testdata/fixtures/openai/embeddings/embeddings-base64.bodies/00.response.json")
	if err != nil {
		t.Fatal(err)
	}
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody(recorded, true)
	asSent := bytes.Replace(recorded, []byte(`"model": "text-embedding-3-small"`), []byte(`"model": "m"`), 1) // the client's model
	if err != nil || !bytes.Equal(out, asSent) {
		t.Errorf("the OpenAI-shaped answer is not passed through but for the client's model: %v\n%s", err, out)
	}
	if u := tr.Usage(); u.PromptTokens != 7 || u.TotalTokens != 7 {
		t.Errorf("usage = %+v", u)
	}
}
