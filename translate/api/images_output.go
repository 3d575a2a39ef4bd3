package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
)

// GeneratedImage is one image a provider returned as bytes.
type GeneratedImage struct {
	// B64 is the image in standard base64, as the provider sent it
	// (usually a slice of the provider's body, see LiftBase64).
	B64 []byte
	// RevisedPrompt is the prompt the provider rewrote the client's into,
	// when it says.
	RevisedPrompt string
}

// MarshalImagesResponse renders the ImagesResponse for images a provider
// returned as bytes: b64_json items (the gateway swaps them for URLs when
// the client asked for those). outputFormat is png, jpeg or webp when the
// provider named the images' type, empty otherwise.
//
// The base64 is copied as it is, after checking it needs no JSON escaping
// and is well formed: images run to megabytes, which json.Marshal would
// scan for escapes and copy once more.
func MarshalImagesResponse(created int64, outputFormat string, images []GeneratedImage) ([]byte, error) {
	size := 64
	for _, im := range images {
		size += len(im.B64) + len(im.RevisedPrompt) + 40
	}
	out := make([]byte, 0, size)
	out = append(out, `{"created":`...)
	out = strconv.AppendInt(out, created, 10)
	out = append(out, `,"data":[`...)
	for i, im := range images {
		if !isBase64(im.B64) {
			return nil, Unusable(fmt.Sprintf("image %d from the provider is not base64", i))
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"b64_json":"`...)
		out = append(out, im.B64...)
		out = append(out, '"')
		if im.RevisedPrompt != "" {
			p, _ := json.Marshal(im.RevisedPrompt)
			out = append(out, `,"revised_prompt":`...)
			out = append(out, p...)
		}
		out = append(out, '}')
	}
	out = append(out, ']')
	if outputFormat != "" {
		out = append(out, `,"output_format":"`...)
		out = append(out, outputFormat...)
		out = append(out, '"')
	}
	return append(out, '}'), nil
}

// base64Alphabet marks the bytes of standard base64 but its padding.
var base64Alphabet = func() (a [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		a[c] = true
	}
	return a
}()

// isBase64 reports standard, padded base64.
func isBase64[T string | []byte](s T) bool {
	n := len(s)
	if n%4 != 0 {
		return false
	}
	end := n
	for end > 0 && n-end < 2 && s[end-1] == '=' {
		end--
	}
	for i := 0; i < end; i++ {
		if !base64Alphabet[s[i]] {
			return false
		}
	}
	return true
}

// OutputFormat is the ImagesResponse output_format for a MIME type, empty
// for types the schema does not name.
func OutputFormat(mimeType string) string {
	switch mimeType {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpeg"
	case "image/webp":
		return "webp"
	}
	return ""
}

var errImagesBody = Unusable("the images response is not a JSON object with a data array")

// ImagesToURLs replaces every b64_json image in an ImagesResponse body
// with the URL keep returns for its bytes, keeping the images' order and
// every other member. The content type keep is given comes from the
// response's output_format, else from the bytes (http.DetectContentType).
// Items that already carry a URL stay as they are; a body without a
// b64_json comes back unchanged.
func ImagesToURLs(body []byte, keep func(data []byte, contentType string) (string, error)) ([]byte, error) {
	small, lifted := LiftBase64(body)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(small, &top); err != nil || top == nil {
		return nil, errImagesBody
	}
	if jsonscan.IsNull(top["data"]) {
		return body, nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(top["data"], &items); err != nil {
		return nil, errImagesBody
	}
	var format string
	json.Unmarshal(top["output_format"], &format) //nolint:errcheck // absent or odd: sniff instead
	changed := false
	for i, it := range items {
		raw, ok := it["b64_json"]
		if !ok || jsonscan.IsNull(raw) {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, Unusable(fmt.Sprintf("data[%d].b64_json is not a string", i))
		}
		b64 := lifted.Value(s)
		data := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
		n, err := base64.StdEncoding.Decode(data, b64)
		if err != nil {
			return nil, fmt.Errorf("data[%d].b64_json: %w: %w", i, translate.ErrUpstream, err)
		}
		data = data[:n]
		contentType := imageContentType(format)
		if contentType == "" {
			contentType = http.DetectContentType(data)
		}
		url, err := keep(data, contentType)
		if err != nil {
			return nil, err
		}
		delete(it, "b64_json")
		if it["url"], err = Marshal(url); err != nil {
			return nil, err
		}
		changed = true
	}
	if !changed {
		return body, nil
	}
	var err error
	if top["data"], err = Marshal(items); err != nil {
		return nil, err
	}
	out, err := Marshal(top)
	return lifted.Restore(out), err
}

// Marshal is json.Marshal without its HTML escaping, so that
// the & of a URL and a transcript's "<", ">" and "&" reach the client as
// written (RawMessage members are escaped anew by json.Marshal).
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func imageContentType(outputFormat string) string {
	switch outputFormat {
	case "png", "jpeg", "webp":
		return "image/" + outputFormat
	}
	return ""
}
