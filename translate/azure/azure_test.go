package azure

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

func newChat(t *testing.T, body string, target translate.Target) translate.Translator {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return NewChat(target, req)
}

func TestRequest(t *testing.T) {
	tr := newChat(t, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		translate.Target{Model: "my deployment", APIKey: "azure-key", BasePath: "/prefix", APIVersion: "2024-12-01-preview"})
	up, err := tr.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	if up.Path != "/prefix/openai/deployments/my%20deployment/chat/completions?api-version=2024-12-01-preview" {
		t.Errorf("path = %q", up.Path)
	}
	want := []translate.Header{{Name: "content-type", Value: "application/json"}, {Name: "api-key", Value: "azure-key"}}
	if diff := cmp.Diff(want, up.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	up, _ = newChat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, translate.Target{Model: "d"}).RequestBody()
	if !bytes.HasSuffix([]byte(up.Path), []byte("api-version="+DefaultAPIVersion)) {
		t.Errorf("default version path = %q", up.Path)
	}
}

func TestRecordedResponses(t *testing.T) {
	for _, file := range []string{"azure-chat-basic.bodies/00.response.json", "test_azure_provider_call.bodies/00.response.json"} {
		body, err := os.ReadFile("../../testdata/fixtures/azure/" + file)
		if err != nil {
			t.Fatal(err)
		}
		tr := newChat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, translate.Target{Model: "d"})
		tr.ResponseHeaders(200, "application/json")
		out, err := tr.ResponseBody(body, true)
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", out)
		if tr.Usage().TotalTokens == 0 {
			t.Errorf("%s: no usage", file)
		}
	}
}
