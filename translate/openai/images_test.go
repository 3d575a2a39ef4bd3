package openai

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

func TestParseImagesRequestValid(t *testing.T) {
	r, err := api.ParseImagesRequest([]byte(`{"model":"dall-e-3","prompt":"a cat","n":null,"size":"1792x1024","quality":"hd",
		"style":"natural","output_compression":0,"user":"u1","seed":7}`))
	if err != nil {
		t.Fatal(err)
	}
	got := *r
	got.Members = nil
	want := api.ImagesRequest{Model: "dall-e-3", ResponseFormat: "url", Prompt: "a cat", N: 1, Size: "1792x1024", Quality: "hd",
		Style: "natural", OutputCompression: new(0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	if string(r.Members["seed"]) != "7" {
		t.Errorf("unknown members are not kept: %v", r.Members)
	}
}

// The default response_format follows the client's model: OpenAI answers
// the GPT image models with base64 only.
func TestImagesResponseFormatDefault(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"model":"dall-e-3","prompt":"p"}`, "url"},
		{`{"model":"imagen","prompt":"p"}`, "url"},
		{`{"model":"gpt-image-1-mini","prompt":"p"}`, "b64_json"},
		{`{"model":"gpt-image-1","prompt":"p","response_format":"url"}`, "url"},
		{`{"model":"dall-e-3","prompt":"p","response_format":"b64_json"}`, "b64_json"},
		{`{"model":"dall-e-3","prompt":"p","response_format":null}`, "url"},
	} {
		r, err := api.ParseImagesRequest([]byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.ResponseFormat != tt.want {
			t.Errorf("%s: ResponseFormat = %q, want %q", tt.body, r.ResponseFormat, tt.want)
		}
	}
}

func TestParseImageSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		w, h int
		ok   bool
	}{
		{"1024x1024", 1024, 1024, true}, {"1536x864", 1536, 864, true}, {"0x10", 0, 10, false}, {"10x", 10, 0, false},
		{"+10x10", 0, 10, false}, {"1024X1024", 0, 0, false}, {"100000x1", 0, 1, false}, {"auto", 0, 0, false},
	} {
		w, h, ok := api.ParseImageSize(tt.in)
		if ok != tt.ok || ok && (w != tt.w || h != tt.h) {
			t.Errorf("ParseImageSize(%q) = %d, %d, %v", tt.in, w, h, ok)
		}
	}
}

var imageTarget = translate.Target{Backend: "b", Provider: "openai", Model: "dall-e-3", APIKey: "sk-provider"}

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

// imageRequestCases are checked as upstream requests (or the client's
// 400) under testdata/images/requests; model is the upstream model.
var imageRequestCases = []struct{ name, model, body string }{
	{"dall-e-3-quality-mapped", "dall-e-3",
		`{"model":"m","prompt":"A lighthouse at dusk","size":"1792x1024","quality":"high","style":"natural","response_format":"b64_json","user":"u1"}`},
	{"dall-e-3-default-url", "dall-e-3", `{"model":"m","prompt":"A lighthouse","size":"auto","quality":"auto"}`},
	{"dall-e-2-small", "dall-e-2", `{"model":"m","prompt":"A lighthouse","n":3,"size":"256x256","quality":"standard"}`},
	{"gpt-image-no-response-format", "gpt-image-1",
		`{"model":"m","prompt":"A lighthouse","n":2,"quality":"hd","size":"1536x1024","response_format":"url","output_format":"webp","output_compression":50,"background":"opaque","moderation":"low"}`},
	{"gpt-image-2-any-size", "gpt-image-2", `{"model":"m","prompt":"A lighthouse","size":"1536x864"}`},
	{"unknown-model-as-sent", "my-image-model", `{"model":"m","prompt":"A lighthouse","n":4,"size":"640x480","quality":"hd","style":"vivid","extra":{"a":1}}`},
	{"dall-e-3-n-2", "dall-e-3", `{"model":"m","prompt":"A lighthouse","n":2}`},
	{"gpt-image-style", "gpt-image-1-mini", `{"model":"m","prompt":"A lighthouse","style":"vivid"}`},
}

func TestImagesRequestGoldens(t *testing.T) {
	for _, tc := range imageRequestCases {
		t.Run(tc.name, func(t *testing.T) {
			target := imageTarget
			target.Model = tc.model
			up, err := newImages(t, tc.body, target).RequestBody()
			translatetest.Golden(t, filepath.Join("testdata", "images", "requests", tc.name+".json"), translatetest.UpstreamJSON(t, up, err))
		})
	}
}

// The recorded exchange: the recorded request goes upstream with the
// deployment's model, the recorded answer reaches the client schema-valid.
func TestImagesRecordedGolden(t *testing.T) {
	for _, tc := range []struct {
		name, recording string
		status          int
	}{
		{"basic", "openai/images/image-generation-basic.bodies", 200},
		{"provider-error", "openai/errors/chat-bad-request.bodies", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "images", tc.name)
			rec := "../../testdata/fixtures/" + tc.recording + "/"
			req := translatetest.ReadFile(t, "../../testdata/fixtures/openai/images/image-generation-basic.bodies/00.request.json")
			im := newImages(t, string(req), translate.Target{Provider: "openai", Model: "gpt-image-1-mini", APIKey: "sk-provider"})
			up, err := im.RequestBody()
			translatetest.Golden(t, filepath.Join(dir, "upstream.json"), translatetest.UpstreamJSON(t, up, err))
			head := im.ResponseHeaders(tc.status, "application/json")
			out, err := im.ResponseBody(translatetest.ReadFile(t, rec+"00.response.json"), true)
			if err != nil {
				t.Fatal(err)
			}
			if head.Status != tc.status || head.Stream {
				t.Errorf("head = %+v", head)
			}
			if tc.status == 200 {
				spec.ValidateT(t, "ImagesResponse", out)
			} else {
				spec.ValidateT(t, "ErrorResponse", out)
			}
			translatetest.Golden(t, filepath.Join(dir, "client.json"), out)
		})
	}
}

func TestImagesResponseNormalized(t *testing.T) {
	const details = `"input_tokens_details":{"text_tokens":10,"image_tokens":0}`
	largeB64 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("\x89PNG\r\n\x1a\n"), 500))
	tests := []struct {
		name, body, want string
		usage            translate.Usage
	}{
		{"usage kept", `{"created":1,"data":[{"b64_json":"AAAA","revised_prompt":null}],"background":"opaque","output_format":"png",
			"size":"1024x1024","quality":"low","usage":{"input_tokens":10,"output_tokens":272,"total_tokens":282,` + details + `}}`,
			`{"background":"opaque","created":1,"data":[{"b64_json":"AAAA"}],"output_format":"png","quality":"low","size":"1024x1024",` +
				`"usage":{"input_tokens":10,"output_tokens":272,"total_tokens":282,` + details + `}}`,
			translate.Usage{PromptTokens: 10, CompletionTokens: 272, TotalTokens: 282, Images: 1}},
		{"usage counted, not shown", `{"created":1,"data":[],"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`,
			`{"created":1,"data":[]}`, translate.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		{"off-schema values dropped", `{"created":1,"data":[{"url":"https://x/y.png"}],"size":"1536x864","quality":"auto","usage":null,"background":7}`,
			`{"created":1,"data":[{"url":"https://x/y.png"}]}`, translate.Usage{Images: 1}},
		{"created set", `{"data":[{"url":"https://x/y.png"}]}`, `{"created":1700000000,"data":[{"url":"https://x/y.png"}]}`, translate.Usage{Images: 1}},
		{"large image kept byte for byte", `{"created":1,"data":[{"b64_json":"` + largeB64 + `","revised_prompt":null}],"usage":null}`,
			`{"created":1,"data":[{"b64_json":"` + largeB64 + `"}]}`, translate.Usage{Images: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im := newImages(t, `{"model":"gpt-image-1","prompt":"p"}`, imageTarget)
			im.ResponseHeaders(200, "application/json")
			out, err := im.ResponseBody([]byte(tt.body), true)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("body =\n%s\nwant\n%s", out, tt.want)
			}
			spec.ValidateT(t, "ImagesResponse", out)
			if im.Usage() != tt.usage {
				t.Errorf("usage = %+v, want %+v", im.Usage(), tt.usage)
			}
		})
	}
	im := newImages(t, `{"model":"gpt-image-1","prompt":"p"}`, imageTarget)
	im.ResponseHeaders(200, "application/json")
	for _, bad := range []string{`[]`, `<html>`, `{"created":1,"data":{}}`} {
		if _, err := im.ResponseBody([]byte(bad), true); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// Usage counts the images of the answer the client gets (its data
// items), whatever token usage the provider reports; an error answer or
// an unusable one counts none.
func TestImagesUsageCountsImages(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		want       translate.Usage
	}{
		{"two urls (dall-e-2)", `{"created":1,"data":[{"url":"https://x/1.png"},{"url":"https://x/2.png"}]}`, 200, translate.Usage{Images: 2}},
		{"two images with token usage (gpt-image-1)", `{"created":1,"data":[{"b64_json":"AAAA"},{"b64_json":"QUJD"}],` +
			`"usage":{"input_tokens":10,"output_tokens":544,"total_tokens":554,"input_tokens_details":{"text_tokens":10,"image_tokens":0}}}`,
			200, translate.Usage{PromptTokens: 10, CompletionTokens: 544, TotalTokens: 554, Images: 2}},
		{"recorded answer", string(translatetest.ReadFile(t, "../../testdata/fixtures/openai/images/image-generation-basic.bodies/00.response.json")),
			200, translate.Usage{Images: 1}},
		{"provider error", `{"error":{"message":"Your request was rejected","type":"invalid_request_error","code":"content_policy_violation"}}`,
			400, translate.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im := newImages(t, `{"model":"m","prompt":"p","n":2}`, translate.Target{Provider: "openai", Model: "dall-e-2"})
			im.ResponseHeaders(tt.status, "application/json")
			if _, err := im.ResponseBody([]byte(tt.body), true); err != nil {
				t.Fatal(err)
			}
			if got := im.Usage(); got != tt.want {
				t.Errorf("usage = %+v, want %+v", got, tt.want)
			}
		})
	}
	im := newImages(t, `{"model":"m","prompt":"p","n":2}`, imageTarget)
	im.ResponseHeaders(200, "application/json")
	if _, err := im.ResponseBody([]byte(`{"created":1,"data":[{"url":"u"},null]}`), true); err == nil || im.Usage().Images != 0 {
		t.Errorf("unusable answer: error %v, usage %+v", err, im.Usage())
	}
}

func encodeImage(t testing.TB, enc func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := enc(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImagesToURLs(t *testing.T) {
	pngBytes := encodeImage(t, func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) })
	jpegBytes := encodeImage(t, func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) })
	b64 := base64.StdEncoding.EncodeToString
	largePNG := append(bytes.Clone(pngBytes), bytes.Repeat([]byte{0xab}, 4000)...)
	type kept struct {
		data        []byte
		contentType string
	}
	tests := []struct {
		name, body, want string
		kept             []kept
	}{
		{"every image, in order, others kept",
			`{"created":5,"data":[{"b64_json":"` + b64(pngBytes) + `","revised_prompt":"a red dot"},{"url":"https://cdn/x.png"},{"b64_json":"` + b64(jpegBytes) + `"}],"usage":{"a":1}}`,
			`{"created":5,"data":[{"revised_prompt":"a red dot","url":"https://gw/img/0?a=1&b=2"},{"url":"https://cdn/x.png"},{"url":"https://gw/img/1?a=1&b=2"}],"usage":{"a":1}}`,
			[]kept{{pngBytes, "image/png"}, {jpegBytes, "image/jpeg"}}},
		{"output_format names the type", `{"created":5,"data":[{"b64_json":"` + b64(pngBytes) + `"}],"output_format":"webp"}`,
			`{"created":5,"data":[{"url":"https://gw/img/0?a=1&b=2"}],"output_format":"webp"}`, []kept{{pngBytes, "image/webp"}}},
		{"a large image, lifted", `{"data":[{"b64_json":"` + b64(largePNG) + `"}],"created":5}`,
			`{"created":5,"data":[{"url":"https://gw/img/0?a=1&b=2"}]}`, []kept{{largePNG, "image/png"}}},
		{"no bytes: unchanged", `{"created":5, "data":[{"url":"https://cdn/x.png"}]}`, `{"created":5, "data":[{"url":"https://cdn/x.png"}]}`, nil},
		{"no data: unchanged", `{"created":5}`, `{"created":5}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []kept
			out, err := api.ImagesToURLs([]byte(tt.body), func(data []byte, contentType string) (string, error) {
				got = append(got, kept{data, contentType})
				return "https://gw/img/" + string(rune('0'+len(got)-1)) + "?a=1&b=2", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("body =\n%s\nwant\n%s", out, tt.want)
			}
			if diff := cmp.Diff(tt.kept, got, cmp.AllowUnexported(kept{})); diff != "" {
				t.Errorf("keep calls (-want +got):\n%s", diff)
			}
		})
	}
	keepAll := func([]byte, string) (string, error) { return "https://gw/x", nil }
	for _, bad := range []string{`{"data":[{"b64_json":"not base64!"}]}`, `{"data":[{"b64_json":"QUJD"}, {"b64_json":"QUJ"}]}`,
		`{"data":[{"b64_json":5}]}`, `{"data":{}}`, `[]`, `nope`} {
		if _, err := api.ImagesToURLs([]byte(bad), keepAll); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	failing := errors.New("store down")
	_, err := api.ImagesToURLs([]byte(`{"data":[{"b64_json":"QUJD"}]}`), func([]byte, string) (string, error) { return "", failing })
	if !errors.Is(err, failing) {
		t.Errorf("keep's error = %v", err)
	}
}

func TestMarshalImagesResponse(t *testing.T) {
	out, err := api.MarshalImagesResponse(7, "png", []api.GeneratedImage{{B64: []byte("QUJD")}, {B64: []byte("QUI="), RevisedPrompt: `a "cat" <3`}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"created":7,"data":[{"b64_json":"QUJD"},{"b64_json":"QUI=","revised_prompt":"a \"cat\" \u003c3"}],"output_format":"png"}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	spec.ValidateT(t, "ImagesResponse", out)
	for _, bad := range []string{"QUJ", "QU=D", `QU"D`, "QUJD\n", "Q==="} {
		if _, err := api.MarshalImagesResponse(7, "", []api.GeneratedImage{{B64: []byte(bad)}}); err == nil {
			t.Errorf("%q accepted as base64", bad)
		}
	}
}

func FuzzParseImagesRequest(f *testing.F) {
	f.Add([]byte(`{"model":"dall-e-3","prompt":"a cat","n":1,"size":"1024x1024","quality":"hd","style":"vivid","response_format":"b64_json"}`))
	f.Add([]byte(`{"model":"gpt-image-1","prompt":"x","size":"auto","output_compression":100,"partial_images":0,"stream":false}`))
	f.Add([]byte(`{"model":"m","prompt":"","n":1e400,"size":"99999x0"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := api.ParseImagesRequest(body)
		var re *api.RequestError
		if err != nil {
			if !errors.As(err, &re) || re.Message == "" {
				t.Fatalf("error %v is not a *RequestError with a message", err)
			}
			return
		}
		if r.Model == "" || r.Prompt == "" || r.N < 1 || r.N > 10 || r.ResponseFormat != "url" && r.ResponseFormat != "b64_json" {
			t.Fatalf("accepted %q as %+v", body, r)
		}
		if r.Size != "" && r.Size != "auto" {
			if _, _, ok := api.ParseImageSize(r.Size); !ok {
				t.Fatalf("accepted size %q", r.Size)
			}
		}
		// What was accepted translates or is refused as a request error.
		_, err = NewImages(translate.Target{Model: "dall-e-3"}, r).RequestBody()
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("RequestBody: %v", err)
		}
	})
}

func BenchmarkImagesToURLs1MiB(b *testing.B) {
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 1, 2, 3, 4}, 1<<17)
	body := []byte(`{"created":1,"data":[{"b64_json":"` + base64.StdEncoding.EncodeToString(img) + `"}],"output_format":"png"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := api.ImagesToURLs(body, func([]byte, string) (string, error) { return "https://gw/x", nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func TestImagesGoldenFilesExist(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "images", "requests"))
	if err != nil {
		t.Skip("no goldens yet (run with -update)")
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".json")
		found := false
		for _, tc := range imageRequestCases {
			found = found || tc.name == name
		}
		if !found {
			t.Errorf("testdata/images/requests/%s has no case", e.Name())
		}
	}
}
