package extproc

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/extproc/extproctest"
)

// A kept image is served at its signed URL until the URL expires; a URL
// whose id, expiry or signature was changed is refused.
func TestSignedImageURLs(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv, err := New(Config{Images: store, ImageURLKey: []byte("0123456789abcdef0123456789abcdef")},
		authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_900_000_000, 0)
	srv.now = func() time.Time { return now }
	gw := extproctest.Start(t, srv, extproctest.Config{})
	png := "\x89PNG\r\n\x1a\n-image-bytes"
	if err := store.SaveImage(ctx, "acct", "img_1", "image/png", []byte(png), now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	good := srv.signImageURL("img_1", now.Add(time.Hour))
	get := func(method, path string) extproctest.Result {
		req, _ := http.NewRequest(method, path, nil)
		return gw.Do(t, req)
	}
	res := get(http.MethodGet, good)
	if res.Status != 200 || string(res.Body) != png || res.Header.Get("Content-Type") != "image/png" || res.Header.Get("Cache-Control") != "private, max-age=3600" {
		t.Fatalf("GET %s = %d %v %q", good, res.Status, res.Header, res.Body)
	}
	if res := get(http.MethodHead, good); res.Status != 200 || len(res.Body) != 0 {
		t.Errorf("HEAD = %d, %d body bytes", res.Status, len(res.Body))
	}
	forged := map[string]string{
		"other id":        strings.Replace(good, "img_1", "img_2", 1),
		"later expiry":    strings.Replace(good, "expires=1900003600", "expires=1900007200", 1),
		"other signature": good[:len(good)-2] + "AA",
		"no signature":    good[:strings.Index(good, "&signature=")],
		"malformed":       imageFilePrefix + "img_1?expires=x&signature=%zz",
	}
	for name, path := range forged {
		res := get(http.MethodGet, path)
		if res.Status != 403 || !strings.Contains(string(res.Body), `"code":"invalid_image_url"`) {
			t.Errorf("%s: %d %s", name, res.Status, res.Body)
		}
	}
	expired := srv.signImageURL("img_1", now.Add(-time.Second))
	if res := get(http.MethodGet, expired); res.Status != 403 || !strings.Contains(string(res.Body), "expired") {
		t.Errorf("expired: %d %s", res.Status, res.Body)
	}
	gone := srv.signImageURL("img_gone", now.Add(time.Hour))
	if res := get(http.MethodGet, gone); res.Status != 404 || !strings.Contains(string(res.Body), `"code":"image_not_found"`) {
		t.Errorf("unknown image: %d %s", res.Status, res.Body)
	}
}
