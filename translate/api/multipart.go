package api

import (
	"bytes"
	"fmt"
	"mime"
	"net/textproto"
	"strings"
)

// formPart is one part of a multipart/form-data body (RFC 7578). data
// aliases the parsed body: an upload is never copied while parsing.
type formPart struct {
	name        string
	filename    string
	hasFilename bool
	contentType string
	data        []byte
}

// Bounds on hostile input. The body itself is already in memory and
// limited by the server; these bound the work and the allocations per part.
const (
	maxFormParts       = 1000
	maxPartHeaderBytes = 16 << 10
)

// errMultipart is a body that is not well-formed multipart/form-data.
type errMultipart string

func (e errMultipart) Error() string { return string(e) }

// parseMultipart splits body into its parts. It accepts what RFC 2046 and
// RFC 7578 describe, with CRLF line ends, a short preamble, an epilogue and
// transport padding after delimiters. It accepts nothing that
// mime/multipart would reject or read differently (the fuzz test holds it
// to that), and it refuses what a gateway should not guess at: bare-LF
// line ends, folded part headers and Content-Transfer-Encoding.
func parseMultipart(body []byte, boundary string) ([]formPart, error) {
	dash := []byte("--" + boundary)
	delim := []byte("\r\n--" + boundary)
	var pos int
	if bytes.HasPrefix(body, dash) && boundaryFollows(body[len(dash):]) {
		pos = len(dash)
	} else {
		i := nextDelimiter(body[:min(len(body), maxPreambleBytes+len(delim))], 0, delim)
		// mime/multipart reads the preamble by lines that end in LF: a
		// bare LF there could start a part this search does not see.
		if i < 0 || bytes.Count(body[:i], []byte("\n")) != bytes.Count(body[:i], []byte("\r\n")) {
			return nil, errMultipart("the body does not start with a multipart boundary line")
		}
		pos = i + len(delim)
	}
	var parts []formPart
	for {
		rest := body[pos:]
		if len(rest) >= 2 && rest[0] == '-' && rest[1] == '-' {
			rest = skipLWSP(rest[2:])
			if len(rest) > 0 && !bytes.HasPrefix(rest, []byte("\r\n")) {
				return nil, errMultipart("unexpected bytes after the closing boundary")
			}
			return parts, nil
		}
		rest = skipLWSP(rest)
		if !bytes.HasPrefix(rest, []byte("\r\n")) {
			return nil, errMultipart("a boundary line does not end in CRLF")
		}
		pos = len(body) - len(rest) + 2
		if len(parts) == maxFormParts {
			return nil, errMultipart(fmt.Sprintf("more than %d parts", maxFormParts))
		}
		var header []byte
		if bytes.HasPrefix(body[pos:], []byte("\r\n")) {
			pos += 2
		} else {
			end := bytes.Index(body[pos:min(len(body), pos+maxPartHeaderBytes)], []byte("\r\n\r\n"))
			if end < 0 {
				return nil, errMultipart("a part's headers do not end (or exceed 16 KiB)")
			}
			header = body[pos : pos+end]
			pos += end + 4
		}
		p, err := partHeader(header)
		if err != nil {
			return nil, err
		}
		// Like mime/multipart, a boundary right after the headers (without
		// the CRLF of a delimiter) ends an empty part.
		if bytes.HasPrefix(body[pos:], dash) && boundaryFollows(body[pos+len(dash):]) {
			p.data = body[pos:pos:pos]
			parts = append(parts, p)
			pos += len(dash)
			continue
		}
		end := nextDelimiter(body, pos, delim)
		if end < 0 {
			return nil, errMultipart("the body ends inside a part: the closing boundary is missing")
		}
		p.data = body[pos:end:end]
		parts = append(parts, p)
		pos = end + len(delim)
	}
}

// maxPreambleBytes bounds the preamble before the first boundary
// (mime/multipart reads it line by line in a 4 KiB buffer).
const maxPreambleBytes = 1024

// nextDelimiter finds the next delimiter at or after from that ends a
// part. As in mime/multipart, "\r\n--boundaryX" is part content.
func nextDelimiter(body []byte, from int, delim []byte) int {
	for from <= len(body) {
		i := bytes.Index(body[from:], delim)
		if i < 0 {
			return -1
		}
		i += from
		if boundaryFollows(body[i+len(delim):]) {
			return i
		}
		from = i + 1
	}
	return -1
}

// boundaryFollows reports whether the bytes after "--boundary" make it a
// boundary: "--", transport padding, a line end, or the end of the body.
func boundaryFollows(after []byte) bool {
	return len(after) == 0 || after[0] == ' ' || after[0] == '\t' || after[0] == '\r' || after[0] == '\n' ||
		len(after) >= 2 && after[0] == '-' && after[1] == '-'
}

// skipLWSP skips transport padding; more than maxPadding bytes of it are
// left in place, so that the line is refused (mime/multipart reads
// boundary lines in a 4 KiB buffer).
func skipLWSP(b []byte) []byte {
	for i := 0; i < maxPadding && len(b) > 0 && (b[0] == ' ' || b[0] == '\t'); i++ {
		b = b[1:]
	}
	return b
}

const maxPadding = 64

// partHeader reads a part's header block: Content-Disposition (form-data
// with a name) is required, Content-Type is optional.
func partHeader(block []byte) (formPart, error) {
	var p formPart
	var disposition string
	var haveDisposition, haveType bool
	for len(block) > 0 {
		line := block
		if i := bytes.Index(block, []byte("\r\n")); i >= 0 {
			line, block = block[:i], block[i+2:]
		} else {
			block = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !headerToken(line[:colon]) {
			return p, errMultipart(fmt.Sprintf("malformed part header line %.40q", line))
		}
		value := bytes.Trim(line[colon+1:], " \t")
		if !headerValue(value) {
			return p, errMultipart(fmt.Sprintf("invalid bytes in part header line %.40q", line))
		}
		switch textproto.CanonicalMIMEHeaderKey(string(line[:colon])) {
		case "Content-Disposition":
			if !haveDisposition {
				disposition, haveDisposition = string(value), true
			}
		case "Content-Type":
			if !haveType {
				p.contentType, haveType = string(value), true
			}
		case "Content-Transfer-Encoding":
			return p, errMultipart("Content-Transfer-Encoding is not supported in multipart/form-data (RFC 7578)")
		}
	}
	kind, params, err := mime.ParseMediaType(disposition)
	if err != nil || kind != "form-data" || params["name"] == "" {
		return p, errMultipart("each part needs a Content-Disposition: form-data header with a name")
	}
	p.name = params["name"]
	p.filename, p.hasFilename = params["filename"]
	return p, nil
}

// headerToken reports whether b is a valid header field name.
func headerToken(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || c <= ' ' || strings.IndexByte("\"(),/:;<=>?@[\\]{}\x7f", c) >= 0 {
			return false
		}
	}
	return true
}

// headerValue reports whether b holds only bytes a header value may hold:
// visible ASCII, space, tab and obs-text.
func headerValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validBoundary checks a boundary parameter against RFC 2046: 1 to 70
// characters from bchars, not ending in a space.
func validBoundary(b string) bool {
	if len(b) == 0 || len(b) > 70 || b[len(b)-1] == ' ' {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte("'()+_,-./:=? ", c) >= 0) {
			return false
		}
	}
	return true
}
