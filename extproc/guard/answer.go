package guard

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
)

// Window is how a stream's answer text is checked: the rules read it
// once Size characters of a kind arrived unchecked (or the answer ended),
// and the last Overlap characters checked stay held until the next
// check, so a match cut across chunks, events or a UTF-8 sequence is
// found whole before any of it reaches the client when it is no longer
// than Overlap.
type Window struct {
	Size, Overlap int
}

// Answer guards one answer as the translator returns it: it reads the
// text each piece of output reports (translate.Output), holds the output
// whose text is not checked yet, and releases it, masked where a rule
// masks, once it is; a block ends the answer with the client API's own
// refusal (refusal.go). Output is held in whole events, in order: an
// event without text waits behind one with text held.
//
// Text of a kind a rule reads is released once checked with Overlap
// characters checked after it; the arguments of tool calls, when a rule
// reads them, at the end of the answer: the client runs a call once its
// arguments are complete, so it waits no longer.
type Answer struct {
	rules   []*Rule
	window  Window
	dialect translate.Dialect
	stream  bool
	masker  Masker
	usage   func() translate.Usage
	// includeUsage: a chat stream's client asked for its usage chunk.
	includeUsage bool

	kinds   [numKinds]kindText
	held    []segment
	results []Result // per rule
	calls   []int    // per rule, to its service
	blocked bool
	failed  *Unavailable // a rule's service failed closed
	// budget bounds the services' checks of one window.
	budget time.Duration
	// now is the clock; textAt is when the first text came, releasedAt
	// when the client first got text.
	now                func() time.Time
	textAt, releasedAt time.Time
	sentAt             time.Time // when the client last got bytes
	// masked are the values masked so far, as JSON string bodies, and
	// their masks: a Responses stream repeats its text in done events
	// and its final response, which are masked by value.
	masked [][2][]byte
	// track: a rule may block a stream, whose refusal continues what the
	// client got (refusal.go).
	track   bool
	refusal refusal
	out     []byte
	texts   []translate.Text
}

const numKinds = int(translate.TextArguments) + 1

// kindText is the decoded text of one kind of the answer so far.
type kindText struct {
	read    bool   // a rule reads it
	whole   bool   // a rule reads it whole, at the answer's end (Rule.Whole)
	text    []byte // from base on
	base    int    // the position of text[0] in the kind's text
	scanned int    // where the rules' last check ended
	runes   int    // characters unscanned
	masks   []span // to apply to held text, in order
}

// span is [a, b) of a kind's text, masked: the mask goes where it starts.
type span struct {
	a, b int
	mask []byte // JSON string body
}

// segment is held output: whole events, and the pieces of text in them.
type segment struct {
	raw    []byte
	pieces []piece
}

// piece is a piece of text in a segment: raw[rawStart:rawEnd] (a JSON
// string's contents) is [start, end) of its kind's text.
type piece struct {
	kind             translate.TextKind
	rawStart, rawEnd int
	start, end       int
	plain            bool // plain text (a transcription's srt), not a JSON string's contents
}

// AnswerConfig is what an Answer needs to know of its exchange.
type AnswerConfig struct {
	Rules   []*Rule // the response rules
	Window  Window
	Dialect translate.Dialect
	Stream  bool
	Masker  Masker
	// Usage is the answer's usage so far, which a refusal cutting a
	// stream states.
	Usage        func() translate.Usage
	IncludeUsage bool
	// Budget bounds the services' checks of one window; zero for none
	// but each service's own timeout.
	Budget time.Duration
	// Now is the clock HoldTime reads; nil means time.Now.
	Now func() time.Time
}

// NewAnswer guards an answer with c.
func NewAnswer(c AnswerConfig) *Answer {
	a := &Answer{rules: c.Rules, window: c.Window, dialect: c.Dialect, stream: c.Stream, masker: c.Masker,
		usage: c.Usage, includeUsage: c.IncludeUsage, results: make([]Result, len(c.Rules)), calls: make([]int, len(c.Rules)), budget: c.Budget, now: c.Now}
	if a.now == nil {
		a.now = time.Now
	}
	a.sentAt = a.now()
	for i, r := range c.Rules {
		a.results[i] = Allowed
		a.track = a.track || c.Stream && r.Action == Block
		for _, k := range r.Kinds {
			a.kinds[k].read = true
			a.kinds[k].whole = a.kinds[k].whole || r.Whole
		}
	}
	return a
}

// Blocked reports that a rule blocked the answer.
func (a *Answer) Blocked() bool { return a.blocked }

// Outcomes are what each rule did.
func (a *Answer) Outcomes() []Outcome {
	out := make([]Outcome, len(a.rules))
	for i, r := range a.rules {
		out[i] = Outcome{Rule: r.Name, Check: r.Check, Phase: Response, Result: a.results[i], Cost: r.callsCost(a.calls[i])}
	}
	return out
}

// Next takes out, what one ResponseBody call returned, and texts, what
// the translator reported of it, and returns the output to send the
// client now and the text in that: held output of earlier calls
// released, with out's or without. eos is the end of the answer: all is
// checked and released. After a block it returns the refusal once, then
// nothing; a service that failed closed is an *Unavailable error once,
// then nothing. ctx bounds the services' checks. The result is valid
// until the next call.
func (a *Answer) Next(ctx context.Context, out []byte, texts []translate.Text, eos bool) ([]byte, []translate.Text, error) {
	if a.blocked || a.failed != nil {
		return nil, nil, nil
	}
	if len(out) == 0 && !eos { // nothing new: the held wait
		return a.idle(), nil, nil
	}
	first := len(a.held)
	if a.textAt.IsZero() && len(texts) > 0 {
		a.textAt = a.now()
	}
	a.split(out, texts)
	if a.check(ctx, eos) {
		if a.failed != nil {
			a.held = nil
			return nil, nil, a.failed
		}
		if a.dialect == translate.Transcription { // no refusal of its own: the exchange's error
			a.held = nil
			return nil, nil, &Refused{Rule: a.rules[slices.Index(a.results, Blocked)].Name}
		}
		return a.refuse(), nil, nil
	}
	n := a.releasable(eos)
	a.out, a.texts = a.out[:0], a.texts[:0]
	for i := range n {
		a.release(&a.held[i])
	}
	// What stays held may be the translator's buffer, which it reuses.
	for i := max(n, first); i < len(a.held); i++ {
		a.held[i].raw = bytes.Clone(a.held[i].raw)
	}
	a.held = append(a.held[:0], a.held[n:]...)
	a.trim()
	if len(a.out) == 0 {
		return a.idle(), nil, nil
	}
	now := a.now()
	if a.releasedAt.IsZero() && len(a.texts) > 0 {
		a.releasedAt = now
	}
	a.sentAt = now
	return a.out, a.texts, nil
}

// idle is the reply to a call that releases nothing: the API's
// keep-alive once the client has had no byte for KeepAlive while text is
// held, else nothing.
func (a *Answer) idle() []byte {
	if len(a.held) == 0 || !a.stream {
		return nil
	}
	now := a.now()
	if now.Sub(a.sentAt) < KeepAlive {
		return nil
	}
	a.sentAt = now
	return a.keepAlive(a.out[:0])
}

// KeepAlive is how long a stream may go without a byte to its client
// while its text is held: then a reply that releases nothing carries the
// API's keep-alive instead (a Messages ping, an SSE comment), so that a
// client's idle timeout does not fire.
const KeepAlive = 5 * time.Second

func (a *Answer) keepAlive(out []byte) []byte {
	if a.dialect == translate.Messages {
		return append(out, "event: ping\ndata: {\"type\": \"ping\"}\n\n"...)
	}
	return append(out, ": keep-alive\n\n"...)
}

// HoldTime is how long the answer's first text was held before the
// client got it; zero when it got none.
func (a *Answer) HoldTime() time.Duration {
	if a.releasedAt.IsZero() {
		return 0
	}
	return a.releasedAt.Sub(a.textAt)
}

// split cuts out into segments, one after each piece of text a rule
// reads (at the end of the event that holds it), and adds their text to
// the kinds'. Pieces of kinds no rule reads are noted for who reads the
// output's texts (a capture) but hold nothing.
func (a *Answer) split(out []byte, texts []translate.Text) {
	var seg segment
	start, end := 0, -1 // the segment open, [start, end) once it has read text
	for _, t := range texts {
		if t.Start < start || t.End > len(out) {
			continue
		}
		if end >= 0 && t.Start >= end { // the piece is in a later event
			seg.raw = out[start:end]
			a.held = append(a.held, seg)
			seg, start, end = segment{}, end, -1
		}
		p := piece{kind: t.Kind, rawStart: t.Start - start, rawEnd: t.End - start, start: -1, end: -1,
			plain: t.Start == 0 || t.End >= len(out) || out[t.Start-1] != '"' || out[t.End] != '"'}
		if k := &a.kinds[t.Kind]; k.read {
			text := out[t.Start:t.End]
			if !p.plain {
				var scratch []byte
				text = jsonscan.Unquote(out[t.Start-1:t.End+1], &scratch)
			}
			p.start = k.base + len(k.text)
			k.text = append(k.text, text...)
			k.runes += utf8.RuneCount(text)
			p.end = k.base + len(k.text)
			if a.stream {
				end = eventEnd(out, t.End)
			}
		}
		seg.pieces = append(seg.pieces, p)
	}
	if end >= 0 {
		seg.raw = out[start:end]
		a.held = append(a.held, seg)
		seg, start = segment{}, end
	}
	if start < len(out) || len(seg.pieces) > 0 {
		seg.raw = out[start:]
		a.held = append(a.held, seg)
	}
}

// eventEnd is the end of the event that holds out[i]: after the blank
// line that ends it, or the end of out.
func eventEnd(out []byte, i int) int {
	for {
		j := bytes.IndexByte(out[i:], '\n')
		if j < 0 {
			return len(out)
		}
		i += j + 1
		if i < len(out) && out[i] == '\n' {
			return i + 1
		}
		if i+1 < len(out) && out[i] == '\r' && out[i+1] == '\n' {
			return i + 2
		}
	}
}

// check runs the rules on the text not checked yet, of each kind that
// has a window of it (or all at the end): the services of the rules that
// read a kind are asked at once, within the answer's budget. It reports a
// block or a service that failed closed (a.failed).
func (a *Answer) check(ctx context.Context, eos bool) bool {
	for k := range a.kinds {
		kt := &a.kinds[k]
		if !kt.read || kt.runes == 0 || kt.runes < a.window.Size && !eos {
			continue
		}
		from := kt.back(kt.scanned, a.window.Overlap)
		if eos && kt.whole {
			from = kt.base // kept whole (trim)
		}
		text := kt.text[from-kt.base:]
		verdicts := a.ask(ctx, translate.TextKind(k), text, eos)
		for i, r := range a.rules {
			if r.reads(translate.TextKind(k)) && (!r.Whole || eos) && a.apply(i, kt, from, text, verdicts[i]) {
				return true
			}
		}
		kt.scanned, kt.runes = kt.base+len(kt.text), 0
	}
	return false
}

// verdict is a service's answer on a window.
type verdict struct {
	Verdict
	err error
}

// ask has the services of the rules that read kind k check text, in
// parallel.
func (a *Answer) ask(ctx context.Context, k translate.TextKind, text []byte, eos bool) []verdict {
	out := make([]verdict, len(a.rules))
	if a.budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.budget)
		defer cancel()
	}
	var wg sync.WaitGroup
	for i, r := range a.rules {
		if r.Backend == nil || !r.reads(k) || r.Whole && !eos {
			continue
		}
		a.calls[i]++
		wg.Go(func() {
			v, err := r.Backend.check(ctx, Input{Phase: Response, Text: string(text), Kind: k})
			out[i] = verdict{v, err}
		})
	}
	wg.Wait()
	return out
}

// apply does what rule i found in text, the window of kt from from on,
// and reports a block or a failure closed.
func (a *Answer) apply(i int, kt *kindText, from int, text []byte, v verdict) bool {
	r := a.rules[i]
	hit := func(s, e int) {
		s, e = s+from, e+from
		if e <= kt.scanned { // found by an earlier check
			return
		}
		a.results[i] = raise(a.results[i], matched(r.Action))
		switch r.Action {
		case Block:
			a.blocked = true
		case Mask:
			a.mask(kt, s, e)
		}
	}
	switch {
	case r.Backend == nil:
		r.find(text, hit)
	case v.err != nil && r.Failure == Open:
		a.results[i] = raise(a.results[i], ErrorOpen)
	case v.err != nil:
		a.results[i], a.failed = raise(a.results[i], ErrorClosed), &Unavailable{Rule: r.Name, Err: v.err}
		return true
	case v.Flagged && len(v.Spans) == 0 && r.Action != Monitor:
		// What the service flagged has no place to mask: blocked.
		a.results[i], a.blocked = raise(a.results[i], Blocked), true
	case v.Flagged && len(v.Spans) == 0:
		a.results[i] = raise(a.results[i], Monitored)
	case v.Flagged:
		for _, sp := range v.Spans {
			hit(sp[0], sp[1])
		}
	}
	return a.blocked
}

// Refused is the error of an answer a rule blocked whose API has no
// refusal of its own (a transcription's): the exchange ends with the
// content_filter error.
type Refused struct{ Rule string }

func (r *Refused) Error() string { return "guardrail " + strconv.Quote(r.Rule) + " blocked the answer" }

// Unavailable is the error of an answer whose rule's service failed
// with failure closed: the exchange ends as the service's unavailability
// says (503, or an error event in a stream).
type Unavailable struct {
	Rule string
	Err  error
}

func (u *Unavailable) Error() string {
	return "guardrail " + strconv.Quote(u.Rule) + ": " + u.Err.Error()
}

func (u *Unavailable) Unwrap() error { return u.Err }

// back is the position n characters before pos in the kind's text, at
// the start of a character (never before what it keeps).
func (kt *kindText) back(pos, n int) int {
	i := pos - kt.base
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRune(kt.text[:i])
		i -= size
	}
	return kt.base + i
}

// mask masks [s, e) of kt's text: merged with a mask it overlaps (a
// match that grew as more text came), else a new one.
func (a *Answer) mask(kt *kindText, s, e int) {
	for i := range kt.masks {
		m := &kt.masks[i]
		if s < m.b && e > m.a {
			m.a, m.b = min(m.a, s), max(m.b, e)
			a.masked = append(a.masked, [2][]byte{appendBody(nil, kt.text[max(m.a, kt.base)-kt.base:m.b-kt.base]), m.mask})
			return
		}
	}
	value := kt.text[s-kt.base : e-kt.base]
	mask := appendBody(nil, []byte(a.masker.Mask(value)))
	kt.masks = append(kt.masks, span{a: s, b: e, mask: mask})
	a.masked = append(a.masked, [2][]byte{appendBody(nil, value), mask})
}

// releasable is how many held segments may go: those whose text of every
// kind read is checked, with Overlap characters checked after it; all at
// the end.
func (a *Answer) releasable(eos bool) int {
	if eos {
		return len(a.held)
	}
	var limit [numKinds]int
	for k := range a.kinds {
		kt := &a.kinds[k]
		limit[k] = kt.back(kt.scanned, a.window.Overlap)
	}
	limit[translate.TextArguments] = -1
	for k := range a.kinds {
		if a.kinds[k].whole {
			limit[k] = -1
		}
	}
	for i, seg := range a.held {
		for _, p := range seg.pieces {
			if p.end > limit[p.kind] {
				return i
			}
		}
	}
	return len(a.held)
}

// release appends seg to the output, masked.
func (a *Answer) release(seg *segment) {
	if a.track {
		a.refusal.note(a.dialect, seg.raw, true)
	}
	start := len(a.out)
	at := 0
	for _, p := range seg.pieces {
		a.out = append(a.out, seg.raw[at:p.rawStart]...)
		textStart := len(a.out)
		a.out = appendMasked(a.out, &a.kinds[p.kind], p, seg.raw[p.rawStart:p.rawEnd])
		a.texts = append(a.texts, translate.Text{Start: textStart, End: len(a.out), Kind: p.kind})
		at = p.rawEnd
	}
	a.out = append(a.out, seg.raw[at:]...)
	// A Responses stream repeats its text in done events and its final
	// response, a transcription in its done event or segments: masked by
	// value.
	if len(a.masked) > 0 && (a.dialect == translate.Responses || a.dialect == translate.Transcription) {
		released := a.out[start:]
		for _, m := range a.masked {
			if bytes.Contains(released, m[0]) {
				released = bytes.ReplaceAll(released, m[0], m[1])
			}
		}
		a.out = append(a.out[:start], released...)
	}
}

// appendMasked appends raw, the JSON string contents of piece p, with
// the masks of kt that cover it applied: a mask where its match starts,
// the rest of the match left out.
func appendMasked(dst []byte, kt *kindText, p piece, raw []byte) []byte {
	if p.start < 0 || !slices.ContainsFunc(kt.masks, p.overlaps) {
		return append(dst, raw...)
	}
	over := slices.DeleteFunc(slices.Clone(kt.masks), func(m span) bool { return !p.overlaps(m) })
	slices.SortFunc(over, func(x, y span) int { return x.a - y.a })
	text := kt.text[p.start-kt.base : p.end-kt.base]
	add := appendBody
	if p.plain {
		add = func(dst, text []byte) []byte { return append(dst, text...) }
	}
	at := p.start
	for _, m := range over {
		if m.a > at {
			dst = add(dst, text[at-p.start:m.a-p.start])
		}
		if m.a >= p.start {
			dst = append(dst, m.mask...) // ASCII, the same in JSON and plain text
		}
		at = max(at, min(m.b, p.end))
	}
	return add(dst, text[at-p.start:])
}

func (p piece) overlaps(m span) bool { return m.a < p.end && m.b > p.start }

// appendBody appends text as the contents of a JSON string.
func appendBody(dst, text []byte) []byte {
	n := len(dst)
	dst = jsonscan.AppendQuoted(dst, text)
	return append(dst[:n], dst[n+1:len(dst)-1]...)
}

// trim drops the text of each kind no held piece and no later check
// reads, and the masks of it.
func (a *Answer) trim() {
	for k := range a.kinds {
		kt := &a.kinds[k]
		if kt.whole { // a rule reads it all at the end
			continue
		}
		keep := kt.back(kt.scanned, a.window.Overlap)
		for _, seg := range a.held {
			for _, p := range seg.pieces {
				if int(p.kind) == k && p.start >= 0 {
					keep = min(keep, p.start)
				}
			}
		}
		if drop := keep - kt.base; drop >= trimAt {
			kt.text = append(kt.text[:0], kt.text[drop:]...)
			kt.base = keep
			kt.masks = slices.DeleteFunc(kt.masks, func(m span) bool { return m.b <= keep })
		}
	}
}

// trimAt is how much text the kinds keep before they drop it.
const trimAt = 4096
