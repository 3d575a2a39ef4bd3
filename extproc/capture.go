package extproc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"modelgate/authz/ledger"
	"modelgate/extproc/redact"
	"modelgate/translate"
)

// Payload capture, opt-in: an exchange's request body as the client sent
// it and the answer as the client got it, each cut at Capture.MaxBytes and
// redacted by its rules (package redact), handed to a CaptureSink with the exchange's ids
// when it ends. Multipart bodies (audio uploads) are never captured, only
// their size.

// Capture configures payload capture.
type Capture struct {
	// Sink receives each exchange's capture. Required.
	Sink CaptureSink
	// MaxBytes is the most of each body kept; zero means 64 KiB.
	MaxBytes int
	// Redact are the redaction rules.
	Redact redact.Rules
}

// CaptureSink keeps captures: a queue to the store (queue.Captures), or
// a file.
type CaptureSink interface {
	SaveCapture(ctx context.Context, c ledger.Capture) error
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
	// hidden are the kinds of generated text the rules hide
	// (redact.Rules.Hides), which the answer's capture leaves out as its
	// translator reports them, whatever the client API's members.
	hidden [translate.TextArguments + 1]bool
}

// newCapture starts the capture of a request with body and contentType;
// nil when captures are off.
func newCapture(c *Capture, contentType string, body []byte) *captureState {
	if c == nil {
		return nil
	}
	st := &captureState{req: captureBuf{max: c.MaxBytes}, resp: captureBuf{max: c.MaxBytes}, reqType: contentType}
	for k := range st.hidden {
		st.hidden[k] = c.Redact.Hides(translate.TextKind(k))
	}
	if strings.HasPrefix(contentType, "multipart/") {
		st.req.b = fmt.Appendf(nil, "[a multipart body of %d bytes, not captured]", len(body))
		return st
	}
	st.req.add(body)
	return st
}

// hidesText reports a capture whose rules hide some generated text.
func (st *captureState) hidesText() bool {
	return st != nil && slices.Contains(st.hidden[:], true)
}

// answer captures out, a piece of the answer the client gets.
func (st *captureState) answer(out []byte) {
	if st != nil {
		st.resp.add(out)
	}
}

// translated captures out, what the client gets of the translation tout.
// Where the rules hide generated text, the capture is tout with the text
// its translator reported hidden (the spans are tout's), scrubbed as out
// was (scrub, nil when it was not): the gateway adds nothing to an answer
// with text but that (an image's URL replaces bytes of one without).
func (st *captureState) translated(out, tout []byte, texts []translate.Text, scrub func([]byte) []byte) {
	if st == nil {
		return
	}
	if hidden, ok := st.hideText(tout, texts); ok {
		if out = hidden; scrub != nil {
			out = scrub(out)
		}
	}
	st.resp.add(out)
}

// hideText is out with the generated text its translator reported in it
// (texts) replaced where the rules hide it; false when they hide none.
func (st *captureState) hideText(out []byte, texts []translate.Text) ([]byte, bool) {
	var b []byte
	last := 0
	for _, t := range texts {
		if !st.hidden[t.Kind] || t.Start < last || t.End > len(out) {
			continue
		}
		b = append(append(b, out[last:t.Start]...), redact.Redacted...)
		last = t.End
	}
	if b == nil {
		return out, false
	}
	return append(b, out[last:]...), true
}
