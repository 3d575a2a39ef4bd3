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

// answer captures out, a piece of the answer the client gets; texts are
// the generated text its translator reported in it (nil when the gateway
// changed the translator's bytes), which the rules may hide.
func (st *captureState) answer(out []byte, texts []translate.Text) {
	if st == nil {
		return
	}
	last := 0
	for _, t := range texts {
		if !st.hidden[t.Kind] || t.Start < last || t.End > len(out) {
			continue
		}
		st.resp.add(out[last:t.Start])
		st.resp.add([]byte(redact.Redacted))
		last = t.End
	}
	st.resp.add(out[last:])
}
