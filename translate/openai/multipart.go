package openai

import (
	"bytes"
	"mime/multipart"
	"net/textproto"
	"strings"
)

// formWriter encodes a multipart/form-data body into one buffer sized up
// front, so an upload is copied exactly once.
type formWriter struct {
	buf bytes.Buffer
	mw  *multipart.Writer
}

func newFormWriter(size int, boundary string) *formWriter {
	w := &formWriter{}
	w.buf.Grow(size)
	w.mw = multipart.NewWriter(&w.buf)
	w.mw.SetBoundary(boundary) //nolint:errcheck // newBoundary's are valid
	return w
}

// newBoundary is a random form boundary, as multipart.Writer picks one.
func newBoundary() string { return multipart.NewWriter(nil).Boundary() }

// partOverhead is a generous bound on the bytes a part adds besides its
// name, filename, content type and data.
const partOverhead = 160

func (w *formWriter) field(name, value string) {
	h := textproto.MIMEHeader{"Content-Disposition": {`form-data; name="` + escapeParam(name) + `"`}}
	pw, _ := w.mw.CreatePart(h) // writes to a bytes.Buffer: no error
	pw.Write([]byte(value))     //nolint:errcheck // bytes.Buffer
}

func (w *formWriter) file(name, filename, contentType string, data []byte) {
	h := textproto.MIMEHeader{"Content-Disposition": {multipart.FileContentDisposition(name, filename)}}
	if contentType != "" {
		h["Content-Type"] = []string{contentType}
	}
	pw, _ := w.mw.CreatePart(h)
	pw.Write(data) //nolint:errcheck // bytes.Buffer
}

// close ends the body and returns it with its content type.
func (w *formWriter) close() ([]byte, string, error) {
	if err := w.mw.Close(); err != nil {
		return nil, "", err
	}
	return w.buf.Bytes(), w.mw.FormDataContentType(), nil
}

// escapeParam escapes a Content-Disposition parameter value the way
// mime/multipart does for file names.
var escapeParam = strings.NewReplacer("\\", "\\\\", `"`, "\\\"", "\r", "%0D", "\n", "%0A").Replace
