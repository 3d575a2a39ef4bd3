package extproc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
)

// Payload capture, opt-in: an exchange's request body as the client sent
// it and the answer as the client got it, each cut at Capture.MaxBytes and
// redacted by its rules, handed to a CaptureSink with the exchange's ids
// when it ends. Multipart bodies (audio uploads) are never captured, only
// their size.

// Capture configures payload capture.
type Capture struct {
	// Sink receives each exchange's capture. Required.
	Sink CaptureSink
	// MaxBytes is the most of each body kept; zero means 64 KiB.
	MaxBytes int
	// Redact are the redaction rules.
	Redact Redaction
}

// Redaction says what a capture hides. Strings that look like API keys
// are always hidden.
type Redaction struct {
	// Members are JSON member names whose values are replaced whole, at
	// any depth (such as "content" or "input").
	Members []string
	// Patterns are replaced wherever they match in the bodies' strings.
	Patterns []*regexp.Regexp
}

// Redacted replaces what a rule hides.
const Redacted = "[redacted]"

// keyLike matches API keys and bearer tokens of the common shapes:
// OpenAI's and modelgate's sk-…, Anthropic's sk-ant-…, Google's AIza…,
// AWS access key ids.
var keyLike = regexp.MustCompile(`\b(sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|AKIA[0-9A-Z]{16})\b`)

// CaptureSink keeps captures: the store (authz.Store is one), or a file.
type CaptureSink interface {
	SaveCapture(ctx context.Context, c authz.Capture) error
}

// captureBuf gathers one body up to the cap.
type captureBuf struct {
	b         []byte
	max       int
	truncated bool
}

func (c *captureBuf) add(p []byte) {
	if room := c.max - len(c.b); len(p) > room {
		p, c.truncated = p[:max(room, 0)], true
	}
	c.b = append(c.b, p...)
}

// captureState is an exchange's capture in progress.
type captureState struct {
	req, resp captureBuf
	reqType   string
}

func (ex *exchange) captureRequest(body []byte) {
	c := ex.s.cfg.Capture
	if c == nil {
		return
	}
	ex.capture = &captureState{req: captureBuf{max: c.MaxBytes}, resp: captureBuf{max: c.MaxBytes}, reqType: ex.contentType}
	if strings.HasPrefix(ex.contentType, "multipart/") {
		ex.capture.req.b = fmt.Appendf(nil, "[a multipart body of %d bytes, not captured]", len(body))
		return
	}
	ex.capture.req.add(body)
}

func (ex *exchange) captureResponse(out []byte) {
	if ex.capture != nil {
		ex.capture.resp.add(out)
	}
}

// saveCapture redacts the exchange's capture and hands it to the sink.
func (ex *exchange) saveCapture(ctx context.Context, end time.Time) {
	c := ex.s.cfg.Capture
	st := ex.capture
	if c == nil || st == nil {
		return
	}
	rec := authz.Capture{RequestID: ex.requestID, Endpoint: ex.endpoint.String(), Model: ex.model, Status: ex.status, At: end,
		RequestTruncated: st.req.truncated, ResponseTruncated: st.resp.truncated}
	if p := ex.principal; p != nil {
		rec.AccountID, rec.KeyID = p.AccountID, p.KeyID
	}
	rec.Request = c.Redact.apply(st.req.b, st.req.truncated)
	rec.Response = c.Redact.apply(st.resp.b, st.resp.truncated)
	if err := c.Sink.SaveCapture(ex.bookkeeping(ctx), rec); err != nil {
		ex.log.Error("saving a payload capture", zap.Error(err))
	}
}

// apply redacts a body: a JSON document member by member, an event
// stream event by event, anything else as text. A body that is cut, or
// whose JSON does not parse, cannot be redacted by member: with member
// rules it is not kept at all.
func (r Redaction) apply(body []byte, truncated bool) string {
	if len(body) == 0 {
		return ""
	}
	if trimmed := bytes.TrimSpace(body); !truncated && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		if out, ok := r.json(trimmed); ok {
			return out
		}
	}
	if bytes.HasPrefix(body, []byte("data:")) || bytes.HasPrefix(body, []byte("event:")) {
		return r.stream(body, truncated)
	}
	if r.unsafe(body) {
		return fmt.Sprintf("[%d bytes not kept: cut or not JSON, so they could not be redacted by member]", len(body))
	}
	return r.text(string(body))
}

// unsafe reports text that member rules could not be applied to but
// might be about: it holds JSON's brackets or a member's quoted name.
func (r Redaction) unsafe(b []byte) bool {
	if len(r.Members) == 0 {
		return false
	}
	if bytes.ContainsAny(b, "{[") {
		return true
	}
	for _, m := range r.Members {
		if bytes.Contains(b, []byte(`"`+m+`"`)) {
			return true
		}
	}
	return false
}

// stream redacts an event stream's data lines one by one.
func (r Redaction) stream(body []byte, truncated bool) string {
	lines := bytes.Split(body, []byte("\n"))
	var b strings.Builder
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		last := i == len(lines)-1
		switch {
		case !ok && r.unsafe(line):
			b.WriteString("[not kept: could not be redacted by member]")
		case !ok:
			b.WriteString(r.text(string(line)))
		case last && truncated: // a cut event: neither parsed nor kept
			b.WriteString("data: [cut]")
		default:
			d := bytes.TrimSpace(data)
			if string(d) == "[DONE]" {
				b.WriteString("data: [DONE]")
			} else if out, ok := r.json(d); ok {
				b.WriteString("data: " + out)
			} else if r.unsafe(d) {
				b.WriteString("data: [not kept: could not be redacted by member]")
			} else {
				b.WriteString("data: " + r.text(string(d)))
			}
		}
	}
	return b.String()
}

// json redacts a JSON document; ok is false when it does not parse.
func (r Redaction) json(doc []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return "", false
	}
	out, err := json.Marshal(r.value(v))
	if err != nil {
		return "", false
	}
	return string(out), true
}

func (r Redaction) value(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			if r.member(k) {
				v[k] = Redacted
			} else {
				v[k] = r.value(m)
			}
		}
	case []any:
		for i, e := range v {
			v[i] = r.value(e)
		}
	case string:
		return r.text(v)
	}
	return v
}

func (r Redaction) member(k string) bool {
	for _, m := range r.Members {
		if m == k {
			return true
		}
	}
	return false
}

// text hides key-like strings and what the patterns match.
func (r Redaction) text(s string) string {
	s = keyLike.ReplaceAllString(s, Redacted)
	for _, p := range r.Patterns {
		s = p.ReplaceAllString(s, Redacted)
	}
	return s
}
