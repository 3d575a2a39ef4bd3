package extproc

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/providers"
)

// publicBase is the scheme and authority clients reach the gateway at,
// for the URLs it hands out.
func (s *Server) publicBase(hm headerMap) string {
	if s.cfg.PublicBaseURL != "" {
		return strings.TrimSuffix(s.cfg.PublicBaseURL, "/")
	}
	scheme := hm.get(":scheme")
	if p := hm.get("x-forwarded-proto"); p == "http" || p == "https" {
		scheme = p
	}
	if scheme != "https" {
		scheme = "http"
	}
	return scheme + "://" + hm.get(":authority")
}

// imageURLs keeps every image of a successful ImagesResponse and puts a
// signed URL in its place, when the client asked for URLs and the
// provider answered with bytes.
func (f *imagesFlow) imageURLs(ctx context.Context, ac answerContext, body []byte) ([]byte, error) {
	if f.req == nil || f.req.ResponseFormat != "url" || ac.head.Status/100 != 2 {
		return body, nil
	}
	if ac.s.cfg.Images == nil {
		return nil, errors.New("the provider returned image bytes, the client asked for URLs, and no image store is configured")
	}
	expires := ac.s.now().Add(ac.s.cfg.ImageURLTTL).Truncate(time.Second)
	return api.ImagesToURLs(body, func(data []byte, contentType string) (string, error) {
		id := newID("img_", 16)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ac.s.cfg.UsageTimeout)
		defer cancel()
		// Kept a minute past the URL's expiry, so that a URL never outlives
		// its image.
		if err := ac.s.cfg.Images.SaveImage(ctx, ac.account, id, contentType, data, expires.Add(time.Minute)); err != nil {
			return "", fmt.Errorf("keeping image: %w", err)
		}
		return f.publicBase + ac.s.signImageURL(id, expires), nil
	})
}

// signImageURL returns the path and query of a kept image's URL, valid
// until expires.
func (s *Server) signImageURL(id string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return imageFilePrefix + id + "?expires=" + exp + "&signature=" + s.imageSignature(id, exp)
}

func (s *Server) imageSignature(id, expires string) string {
	mac := hmac.New(sha256.New, s.cfg.ImageURLKey)
	mac.Write([]byte(id + "\n" + expires))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// serveImage answers GET on a signed image URL. The signature is the
// credential: no API key is needed, as for OpenAI's own image URLs.
func (s *Server) serveImage(ctx context.Context, hm headerMap) (*extprocv3.ProcessingResponse, error) {
	u, err := url.ParseRequestURI(hm.get(":path"))
	if err != nil {
		return nil, errImageURL("The image URL is malformed.")
	}
	id := strings.TrimPrefix(u.Path, imageFilePrefix)
	q := u.Query()
	exp, sig := q.Get("expires"), q.Get("signature")
	expires, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !hmac.Equal([]byte(sig), []byte(s.imageSignature(id, exp))) {
		return nil, errImageURL("The image URL's signature is not valid.")
	}
	now := s.now()
	if now.Unix() >= expires {
		return nil, errImageURL("The image URL has expired.")
	}
	if s.cfg.Images == nil {
		return nil, errImageNotFound()
	}
	contentType, data, err := s.cfg.Images.Image(ctx, id, now)
	if errors.Is(err, authz.ErrNotFound) {
		return nil, errImageNotFound()
	}
	if err != nil {
		return nil, err
	}
	var h headers
	h.Set("content-type", contentType)
	h.Set("cache-control", fmt.Sprintf("private, max-age=%d", expires-now.Unix()))
	if hm.get(":method") == http.MethodHead {
		data = nil
	}
	return localReply(http.StatusOK, &h, data, "modelgate_image"), nil
}

func errImageURL(msg string) *APIError {
	return &APIError{Status: http.StatusForbidden, Type: typePermission, Code: "invalid_image_url", Message: msg}
}

func errImageNotFound() *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "image_not_found",
		Message: "The image is no longer available."}
}

// imagesFlow is an image generation's: the images a provider returns as
// bytes become signed URLs of the gateway when the client asked for URLs
// (imageURLs), and prices count images of the size and quality asked.
type imagesFlow struct {
	req        *api.ImagesRequest
	publicBase string // where the client reaches the gateway, for image URLs
}

func (f *imagesFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := api.ParseImagesRequest(body)
	if err != nil {
		return nil, err
	}
	if err := st.pick(ctx, req.Model, st.request().ask(body, asks{})); err != nil {
		return nil, err
	}
	f.req = req
	if st.server().guarded() {
		r := st.request()
		r.texts = func() []translate.RequestText { return api.ImagesTexts(req) }
		r.maskTexts = func(m []string) []byte {
			api.MapImagesTexts(req, inOrder(m))
			return mustJSON(req.Members)
		}
	}
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		if p.Images == nil {
			return nil, errEndpointNotSupported(req.Model, endpointImages)
		}
		return p.Images(t, req), nil
	})
}

func (f *imagesFlow) answer(ctx context.Context, ac answerContext, out []byte, _ bool) ([]byte, error) {
	return f.imageURLs(ctx, ac, out)
}

func (f *imagesFlow) price(u pricing.Usage, reserving bool) pricing.Usage {
	if f.req == nil {
		return u
	}
	if reserving { // the images asked for; the answer's count is the provider's
		u.Images = int64(max(f.req.N, 1))
	}
	u.ImageSize, u.ImageQuality = f.req.Size, f.req.Quality
	return u
}
