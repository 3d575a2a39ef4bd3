package api

import (
	"bytes"
	"io"
	"mime/multipart"
	"path/filepath"
	"testing"
)

// FuzzParseMultipart checks the form parser against mime/multipart: any
// body both read gives the same parts.
func FuzzParseMultipart(f *testing.F) {
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=model\r\n\r\nm\r\n--b\r\nContent-Disposition: form-data; name=file; filename=x.wav\r\n\r\nRIFF\r\n--b--"), "b")
	f.Add([]byte("preamble\r\n--b \r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%E2%82%AC.ogg\r\n\r\n--b\r\n\r\n--bX\r\n--b--\r\nepilogue"), "b")
	f.Fuzz(func(t *testing.T, data []byte, boundary string) {
		if !validBoundary(boundary) {
			return
		}
		if parts, err := parseMultipart(data, boundary); err == nil {
			agreesWithStdlib(t, data, boundary, parts)
		}
	})
}

// agreesWithStdlib reads data with mime/multipart and requires the same
// parts (RFC 7578 file names lose their directories there).
func agreesWithStdlib(t *testing.T, data []byte, boundary string, parts []formPart) {
	t.Helper()
	r := multipart.NewReader(bytes.NewReader(data), boundary)
	for i := 0; ; i++ {
		p, err := r.NextPart()
		if err == io.EOF {
			if i != len(parts) {
				t.Fatalf("mime/multipart read %d parts, parseMultipart %d", i, len(parts))
			}
			return
		}
		if err != nil {
			t.Fatalf("parseMultipart accepted what mime/multipart rejects at part %d: %v", i, err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("parseMultipart accepted what mime/multipart rejects in part %d: %v", i, err)
		}
		if i >= len(parts) {
			t.Fatalf("mime/multipart reads more parts than %d", len(parts))
		}
		want := parts[i]
		wantName := want.filename
		if wantName != "" {
			wantName = filepath.Base(wantName)
		}
		if p.FormName() != want.name || p.FileName() != wantName || p.Header.Get("Content-Type") != want.contentType || !bytes.Equal(b, want.data) {
			t.Fatalf("part %d: mime/multipart reads %q %q %q %q; parseMultipart %q %q %q %q", i,
				p.FormName(), p.FileName(), p.Header.Get("Content-Type"), b, want.name, want.filename, want.contentType, want.data)
		}
	}
}
