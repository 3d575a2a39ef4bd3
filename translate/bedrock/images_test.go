package bedrock

import (
	"bytes"
	"encoding/base64"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

func newImages(t testing.TB, body string, target translate.Target) *images {
	t.Helper()
	req, err := api.ParseImagesRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	im := NewImages(target, req).(*images)
	im.now = func() time.Time { return time.Unix(1700000000, 0) }
	return im
}

const novaCanvas = "amazon.nova-canvas-v1:0"

var (
	apiKeyTarget = translate.Target{Provider: "bedrock", Model: novaCanvas, APIKey: "bedrock-api-key"}
	// sigV4Target signs with fixed credentials at a fixed time, so the
	// golden pins the signature.
	sigV4Target = translate.Target{Provider: "bedrock", Model: novaCanvas, Host: "bedrock-runtime.us-east-1.amazonaws.com",
		AWS: translate.AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session"}}
	titanTarget = translate.Target{Provider: "bedrock", Model: "amazon.titan-image-generator-v2:0", APIKey: "bedrock-api-key"}
)

// imageRequestCases are checked against testdata/images/<name>.json.
var imageRequestCases = []struct {
	name, body string
	target     translate.Target
}{
	{"nova-default", `{"model":"nova-canvas","prompt":"A lighthouse at dusk"}`, apiKeyTarget},
	{"nova-wide-premium-signed", `{"model":"nova-canvas","prompt":"A lighthouse","n":3,"size":"1792x1024","quality":"hd","response_format":"b64_json"}`, sigV4Target},
	{"nova-standard", `{"model":"nova-canvas","prompt":"A lighthouse","size":"1024x1536","quality":"medium","output_format":"png","moderation":"low"}`, apiKeyTarget},
	{"titan-small", `{"model":"titan-image","prompt":"A lighthouse","n":5,"size":"512x512","quality":"low"}`, titanTarget},
	{"nova-too-small", `{"model":"nova-canvas","prompt":"A lighthouse","size":"256x256"}`, apiKeyTarget},
	{"nova-n-6", `{"model":"nova-canvas","prompt":"A lighthouse","n":6}`, apiKeyTarget},
	{"titan-wide", `{"model":"titan-image","prompt":"A lighthouse","size":"1792x1024"}`, titanTarget},
	{"jpeg", `{"model":"nova-canvas","prompt":"A lighthouse","output_format":"jpeg"}`, apiKeyTarget},
	{"not-an-amazon-image-model", `{"model":"sd","prompt":"A lighthouse"}`,
		translate.Target{Provider: "bedrock", Model: "stability.sd3-5-large-v1:0", APIKey: "k"}},
}

func TestImagesRequestGoldens(t *testing.T) {
	for _, tc := range imageRequestCases {
		t.Run(tc.name, func(t *testing.T) {
			up, err := newImages(t, tc.body, tc.target).RequestBody()
			translatetest.Golden(t, filepath.Join("testdata", "images", tc.name+".json"), translatetest.UpstreamJSON(t, up, err))
		})
	}
}

// The signature covers the escaped path and the body as sent.
func TestImagesSignature(t *testing.T) {
	im := newImages(t, `{"model":"nova-canvas","prompt":"A lighthouse"}`, sigV4Target)
	up, err := im.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	want := Sign(sigV4Target.AWS, "us-east-1", "POST", sigV4Target.Host, "/model/amazon.nova-canvas-v1%3A0/invoke", "application/json", up.Body, time.Unix(1700000000, 0))
	if got := up.Headers[1:]; len(got) != len(want) || got[0] != want[0] {
		t.Errorf("headers = %v\nwant %v", got, want)
	}
}

// No Bedrock image traffic was recorded; the bodies follow the documented
// InvokeModel response of Nova Canvas and Titan.
func TestImagesResponse(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nrest"))
	im := newImages(t, `{"model":"nova-canvas","prompt":"p","n":2}`, apiKeyTarget)
	im.ResponseHeaders(200, "application/json")
	out, err := im.ResponseBody([]byte(`{"images":["`+png+`","QUJD"],"error":null}`), true)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"created":1700000000,"data":[{"b64_json":"` + png + `"},{"b64_json":"QUJD"}]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	spec.ValidateT(t, "ImagesResponse", out)
	if im.Usage() != (translate.Usage{Images: 2}) { // no tokens: the images the client got
		t.Errorf("usage = %+v, want 2 images", im.Usage())
	}
	for _, bad := range []string{`{"images":["%%%"]}`, `[]`, `{"images":"x"}`} {
		im := newImages(t, `{"model":"nova-canvas","prompt":"p"}`, apiKeyTarget)
		im.ResponseHeaders(200, "application/json")
		var re *api.RequestError
		if _, err := im.ResponseBody([]byte(bad), true); err == nil || errors.As(err, &re) {
			t.Errorf("%s: error %v, want a translation failure", bad, err)
		}
	}
}

func BenchmarkNovaCanvasResponse1MiB(b *testing.B) {
	img := bytes.Repeat([]byte("\x89PNG\r\n\x1a\n"), 1<<17)
	body := []byte(`{"images":["` + base64.StdEncoding.EncodeToString(img) + `"]}`)
	req, err := api.ParseImagesRequest([]byte(`{"model":"nova-canvas","prompt":"p","response_format":"b64_json"}`))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		tr := NewImages(apiKeyTarget, req)
		tr.ResponseHeaders(200, "application/json")
		if _, err := tr.ResponseBody(body, true); err != nil {
			b.Fatal(err)
		}
	}
}
