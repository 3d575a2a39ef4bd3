package vertex

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

var imageTarget = translate.Target{Provider: "vertex", Model: "imagen-4.0-generate-001", Project: "my-proj", Region: "us-central1", APIKey: "ya29.token"}

// imageRequestCases are checked against testdata/images/<name>.json: the
// body is the Gemini API's (tested there); the path and credential are
// Vertex AI's.
var imageRequestCases = []struct {
	name, body string
	target     translate.Target
}{
	{"regional", `{"model":"vertex-imagen","prompt":"A lighthouse at dusk","n":2,"size":"1024x1792"}`, imageTarget},
	{"global-base-path", `{"model":"vertex-imagen","prompt":"A lighthouse"}`,
		translate.Target{Provider: "vertex", Model: "imagen-4.0-fast-generate-001", Project: "p", BasePath: "/proxy"}},
	{"size-2-3", `{"model":"vertex-imagen","prompt":"A lighthouse","size":"1024x1536"}`, imageTarget},
}

func TestImagesRequestGoldens(t *testing.T) {
	for _, tc := range imageRequestCases {
		t.Run(tc.name, func(t *testing.T) {
			up, err := newImages(t, tc.body, tc.target).RequestBody()
			translatetest.Golden(t, filepath.Join("testdata", "images", tc.name+".json"), translatetest.UpstreamJSON(t, up, err))
		})
	}
}

// Vertex answers as the Gemini API does (no Imagen traffic was recorded;
// this is the documented shape), errors in Google's envelope.
func TestImagesResponse(t *testing.T) {
	tr := newImages(t, `{"model":"vertex-imagen","prompt":"p"}`, imageTarget)
	tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody([]byte(`{"predictions":[{"bytesBase64Encoded":"iVBORw0KGgo=","mimeType":"image/png"}]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "ImagesResponse", out)
	if tr.Usage() != (translate.Usage{Images: 1}) {
		t.Errorf("usage = %+v, want 1 image", tr.Usage())
	}

	tr = newImages(t, `{"model":"vertex-imagen","prompt":"p"}`, imageTarget)
	if head := tr.ResponseHeaders(403, "application/json"); head.Status != 502 {
		t.Errorf("403 became %d", head.Status)
	}
	out, _ = tr.ResponseBody([]byte(`{"error":{"code":403,"message":"Permission denied on project my-proj","status":"PERMISSION_DENIED"}}`), true)
	spec.ValidateT(t, "ErrorResponse", out)
	if bytes.Contains(out, []byte("my-proj")) {
		t.Errorf("credential error leaks the provider's message: %s", out)
	}
}
