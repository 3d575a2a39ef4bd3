package gemini

import (
	"bytes"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

func newImages(t testing.TB, body string) *images {
	t.Helper()
	req, err := api.ParseImagesRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	im := NewImages(translate.Target{Provider: "gemini", Model: "imagen-4.0-generate-001", APIKey: "g-key"}, req).(*images)
	im.now = func() time.Time { return time.Unix(1700000000, 0) }
	return im
}

// imagenRequestCases are checked against testdata/images/<name>.json.
var imagenRequestCases = map[string]string{
	"default":         `{"model":"imagen","prompt":"A lighthouse at dusk"}`,
	"wide-four":       `{"model":"imagen","prompt":"A lighthouse","n":4,"size":"1792x1024","quality":"hd","response_format":"url","moderation":"low"}`,
	"square-2k-jpeg":  `{"model":"imagen","prompt":"A lighthouse","size":"2048x2048","output_format":"jpeg","output_compression":80}`,
	"portrait-native": `{"model":"imagen","prompt":"A lighthouse","size":"768x1408","output_format":"png","background":"opaque"}`,
	"small-square":    `{"model":"imagen","prompt":"A lighthouse","size":"256x256"}`,
	"n-5":             `{"model":"imagen","prompt":"A lighthouse","n":5}`,
	"size-3-2":        `{"model":"imagen","prompt":"A lighthouse","size":"1536x1024"}`,
	"style":           `{"model":"imagen","prompt":"A lighthouse","style":"vivid"}`,
}

func TestImagesRequestGoldens(t *testing.T) {
	for name, body := range imagenRequestCases {
		t.Run(name, func(t *testing.T) {
			up, err := newImages(t, body).RequestBody()
			translatetest.Golden(t, filepath.Join("testdata", "images", name+".json"), translatetest.UpstreamJSON(t, up, err))
		})
	}
}

func TestImagenAspect(t *testing.T) {
	for _, tt := range []struct{ size, ratio, sampleSize string }{
		{"1024x1024", "1:1", ""}, {"512x512", "1:1", ""}, {"1792x1024", "16:9", ""}, {"1024x1792", "9:16", ""},
		{"1280x896", "4:3", ""}, {"896x1280", "3:4", ""}, {"1024x768", "4:3", ""}, {"1600x900", "16:9", ""},
		{"2816x1536", "16:9", "2K"}, {"1792x2560", "3:4", "2K"}, {"1536x1024", "", ""}, {"123x456", "", ""}, {"1024x1536", "", ""},
	} {
		ratio, sampleSize, ok := imagenAspect(tt.size)
		if ratio != tt.ratio || sampleSize != tt.sampleSize || ok != (tt.ratio != "") {
			t.Errorf("imagenAspect(%s) = %q, %q, %v; want %q, %q", tt.size, ratio, sampleSize, ok, tt.ratio, tt.sampleSize)
		}
	}
}

// No Imagen traffic was recorded; the predictions below follow the
// documented response shape.
func TestImagenResponse(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n-not-really-a-png"))
	tests := []struct {
		name, body, want string
		images           int64
	}{
		{"two images, enhanced prompt",
			`{"predictions":[{"mimeType":"image/png","bytesBase64Encoded":"` + png + `","prompt":"A tall lighthouse"},{"bytesBase64Encoded":"QUJD","mimeType":"image/png"}]}`,
			`{"created":1700000000,"data":[{"b64_json":"` + png + `","revised_prompt":"A tall lighthouse"},{"b64_json":"QUJD"}],"output_format":"png"}`, 2},
		{"one filtered, mixed types",
			`{"predictions":[{"raiFilteredReason":"filtered"},{"bytesBase64Encoded":"QUJD","mimeType":"image/jpeg"},{"bytesBase64Encoded":"QUJD","mimeType":"image/png"}]}`,
			`{"created":1700000000,"data":[{"b64_json":"QUJD"},{"b64_json":"QUJD"}]}`, 2},
		{"jpeg", `{"predictions":[{"bytesBase64Encoded":"QUJD","mimeType":"image/jpeg"}]}`,
			`{"created":1700000000,"data":[{"b64_json":"QUJD"}],"output_format":"jpeg"}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im := newImages(t, `{"model":"imagen","prompt":"p"}`)
			if head := im.ResponseHeaders(200, "application/json; charset=UTF-8"); head.Status != 200 || head.Stream {
				t.Errorf("head = %+v", head)
			}
			out, err := im.ResponseBody([]byte(tt.body), true)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got  %s\nwant %s", out, tt.want)
			}
			spec.ValidateT(t, "ImagesResponse", out)
			if got := im.Usage(); got != (translate.Usage{Images: tt.images}) {
				t.Errorf("usage = %+v, want %d images and no tokens", got, tt.images)
			}
		})
	}
	for _, bad := range []string{`[1]`, `{"predictions":[{"bytesBase64Encoded":"not base64"}]}`, `<html>`} {
		im := newImages(t, `{"model":"imagen","prompt":"p"}`)
		im.ResponseHeaders(200, "application/json")
		var re *api.RequestError
		if _, err := im.ResponseBody([]byte(bad), true); err == nil || errors.As(err, &re) {
			t.Errorf("%s: error %v, want a translation failure", bad, err)
		}
	}
}

// imagenResponse1MiB is a prediction carrying one 1 MiB image.
func imagenResponse1MiB() []byte {
	img := bytes.Repeat([]byte("\x89PNG\r\n\x1a\n"), 1<<17)
	return []byte(`{"predictions":[{"mimeType":"image/png","bytesBase64Encoded":"` + base64.StdEncoding.EncodeToString(img) + `"}]}`)
}

func BenchmarkImagenResponse1MiB(b *testing.B) {
	body := imagenResponse1MiB()
	req, err := api.ParseImagesRequest([]byte(`{"model":"imagen","prompt":"p","response_format":"b64_json"}`))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		tr := NewImages(translate.Target{Model: "imagen-4.0-generate-001"}, req)
		tr.ResponseHeaders(200, "application/json")
		out, err := tr.ResponseBody(body, true)
		if err != nil || !strings.HasPrefix(string(out[:20]), `{"created":`) {
			b.Fatal(err)
		}
	}
}
