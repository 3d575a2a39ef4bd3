package azure

import (
	"bytes"
	"path/filepath"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

func newImages(t *testing.T, body string, target translate.Target) translate.Translator {
	t.Helper()
	req, err := api.ParseImagesRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return NewImages(target, req)
}

// imageRequestCases are checked against testdata/images/<name>.json. A
// deployment named after an OpenAI model gets that model's rules; another
// name passes the request as sent.
var imageRequestCases = []struct {
	name, body string
	target     translate.Target
}{
	{"dall-e-3-deployment", `{"model":"azure-dall-e-3","prompt":"A lighthouse at dusk","quality":"high","style":"vivid","response_format":"b64_json"}`,
		translate.Target{Provider: "azure", Model: "dall-e-3", APIKey: "azure-key", BasePath: "/prefix", APIVersion: "2024-10-21"}},
	{"named-deployment", `{"model":"azure-images","prompt":"A lighthouse","n":2,"size":"1536x1024","quality":"high"}`,
		translate.Target{Provider: "azure", Model: "my images", APIKey: "azure-key"}},
	{"dall-e-3-n-2", `{"model":"azure-dall-e-3","prompt":"A lighthouse","n":2}`,
		translate.Target{Provider: "azure", Model: "dall-e-3", APIKey: "azure-key"}},
}

func TestImagesRequestGoldens(t *testing.T) {
	for _, tc := range imageRequestCases {
		t.Run(tc.name, func(t *testing.T) {
			up, err := newImages(t, tc.body, tc.target).RequestBody()
			translatetest.Golden(t, filepath.Join("testdata", "images", tc.name+".json"), translatetest.UpstreamJSON(t, up, err))
		})
	}
}

// Azure's answer is OpenAI's; dall-e-3 adds revised_prompt and Azure adds
// content filter results the gateway passes. No Azure image traffic was
// recorded: this is the documented shape.
func TestImagesResponse(t *testing.T) {
	tr := newImages(t, `{"model":"azure-dall-e-3","prompt":"p"}`, translate.Target{Model: "dall-e-3"})
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody([]byte(`{"created":1698116662,"data":[{"url":"https://dalleproduse.blob.core.windows.net/private/images/x.png?se=1&sig=a",
		"revised_prompt":"A lighthouse at dusk","content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "ImagesResponse", out)
	if !bytes.Contains(out, []byte(`"revised_prompt":"A lighthouse at dusk"`)) || !bytes.Contains(out, []byte("?se=1&sig=a")) {
		t.Errorf("body = %s", out)
	}
	if tr.Usage() != (translate.Usage{Images: 1}) {
		t.Errorf("usage = %+v, want 1 image", tr.Usage())
	}
	tr = newImages(t, `{"model":"azure-images","prompt":"p","n":2}`, translate.Target{Model: "my images"})
	tr.ResponseHeaders(200, "application/json")
	if _, err := tr.ResponseBody([]byte(`{"created":1,"data":[{"b64_json":"AAAA"},{"b64_json":"QUJD"}]}`), true); err != nil {
		t.Fatal(err)
	}
	if tr.Usage().Images != 2 {
		t.Errorf("usage = %+v, want 2 images", tr.Usage())
	}
}
