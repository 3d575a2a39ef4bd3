// Package sse decodes and encodes server-sent event streams incrementally,
// following the WHATWG event-stream rules, for streams cut at arbitrary
// byte boundaries.
package sse

import (
	"bytes"
	"errors"
)

// DefaultMax is the limit on one event's data when Decoder.Max is zero.
const DefaultMax = 16 << 20

// ErrEventTooLarge is the error of a Decoder that met a line or an event
// larger than its limit.
var ErrEventTooLarge = errors.New("sse: event larger than the decoder's limit")

// Event is one dispatched event.
type Event struct {
	// Type is the event: field; empty when absent.
	Type string
	// Data is the data: lines joined with "\n". It may share the chunk
	// fed: callers must not change it in place (append copies it).
	Data []byte
	// ID is the event's own id: field; empty when absent.
	ID string
}

// Decoder splits a byte stream into events. Its zero value is ready; it is
// not safe for concurrent use.
//
// Decoding is linear in the stream's length however it is cut: a byte is
// searched for line breaks only in the Feed that brings it, complete lines
// are read where they lie in the chunk, and only a line cut by a chunk's
// end is copied aside (into a buffer that doubles) until its end arrives;
// that buffer then becomes the event's data without another copy.
type Decoder struct {
	// Max bounds the length of one event's data, and of one line to that
	// of a data line with Max bytes ("data: " and Max); zero means
	// DefaultMax. A stream that exceeds it fails: Err returns
	// ErrEventTooLarge and Feed returns no more events.
	Max int

	buf []byte // the start of a line cut by the end of a chunk; it holds no line break
	// parts hold a long cut line instead of buf: the chunks themselves
	// (Feed keeps them until the line ends), joined once when it does, so
	// each byte is copied once and no buffer is regrown.
	parts    [][]byte
	partsLen int
	data     []byte // data of the event being built
	typ, id  string
	lastTyp  string // the type of the last event that had one
	hasData  bool   // a field of the current event was seen
	skipLF   bool   // the previous chunk ended in \r: a leading \n belongs to it
	err      error
	events   []Event
}

// keepBuf is the largest line buffer kept for the next cut line; a larger
// one, left by a large event, is let go.
const keepBuf = 64 << 10

// Feed adds a chunk and returns the events it completes. The returned slice
// is reused by the next call. After an error (see Err) it returns none.
// A line longer than 64 KiB keeps references to the chunks it spans until
// it ends: callers must not change a chunk after feeding it (ext_proc body
// messages are never reused).
func (d *Decoder) Feed(chunk []byte) []Event {
	d.events = d.events[:0]
	if d.err != nil {
		return d.events
	}
	if d.skipLF && len(chunk) > 0 {
		d.skipLF = false
		if chunk[0] == '\n' {
			chunk = chunk[1:]
		}
	}
	// lf and cr are the next \n and \r at or after pos (len(chunk) if
	// none): each is searched for again only once pos has passed it.
	lf, cr := -1, -1
	pos := 0
	for pos < len(chunk) {
		if lf < pos {
			lf = indexFrom(chunk, pos, '\n')
		}
		if cr < pos {
			cr = indexFrom(chunk, pos, '\r')
		}
		i := min(lf, cr)
		if i == len(chunk) {
			break
		}
		line, owned := chunk[pos:i], d.held() > 0
		switch {
		case d.parts != nil:
			if line = d.join(line); line == nil {
				return d.events
			}
		case owned:
			if !d.hold(line) {
				return d.events
			}
			if line = d.buf; d.parts != nil { // the piece made it long
				line = d.join(nil)
			}
		case len(line) > d.lineMax():
			d.fail()
			return d.events
		}
		next := i + 1
		if chunk[i] == '\r' {
			if next == len(chunk) {
				d.skipLF = true
			} else if chunk[next] == '\n' {
				next++
			}
		}
		d.line(line, owned)
		if cap(d.buf) > keepBuf {
			d.buf = nil
		} else {
			d.buf = d.buf[:0]
		}
		if d.err != nil {
			return d.events
		}
		pos = next
	}
	d.hold(chunk[pos:])
	return d.events
}

func indexFrom(b []byte, from int, c byte) int {
	if i := bytes.IndexByte(b[from:], c); i >= 0 {
		return from + i
	}
	return len(b)
}

func (d *Decoder) max() int {
	if d.Max > 0 {
		return d.Max
	}
	return DefaultMax
}

func (d *Decoder) lineMax() int { return d.max() + len("data: ") }

// hold appends part of a line that a chunk's end cut.
// held is the length of the cut line held.
func (d *Decoder) held() int { return len(d.buf) + d.partsLen }

func (d *Decoder) hold(part []byte) bool {
	if d.held()+len(part) > d.lineMax() {
		d.fail()
		return false
	}
	if d.parts != nil || len(d.buf)+len(part) > keepBuf {
		if d.parts == nil && len(d.buf) > 0 { // buf becomes the first part
			d.parts, d.partsLen, d.buf = [][]byte{d.buf}, len(d.buf), nil
		}
		if len(part) > 0 {
			d.parts = append(d.parts, part)
			d.partsLen += len(part)
		}
		return true
	}
	if need := len(d.buf) + len(part); need > cap(d.buf) {
		// Double, where append grows large slices by a quarter: a long
		// line is copied about twice rather than about five times.
		grown := make([]byte, len(d.buf), max(need, 2*cap(d.buf), 512))
		copy(grown, d.buf)
		d.buf = grown
	}
	d.buf = append(d.buf, part...)
	return true
}

// fail stops the decoder and lets its buffers go.
// join ends a line held in parts with its last piece; nil when it is
// over the limit.
func (d *Decoder) join(last []byte) []byte {
	if d.partsLen+len(last) > d.lineMax() {
		d.fail()
		return nil
	}
	line := bytes.Join(append(d.parts, last), nil) // not zeroed before the copy
	d.parts, d.partsLen = nil, 0
	return line
}

func (d *Decoder) fail() {
	d.err = ErrEventTooLarge
	d.buf, d.parts, d.partsLen, d.data, d.typ, d.id = nil, nil, 0, nil, "", ""
}

// Err returns ErrEventTooLarge once an event or a line exceeded the limit
// (see Max), and nil before.
func (d *Decoder) Err() error { return d.err }

// Pending reports whether an incomplete event or line is held: at the end
// of a stream it means the stream was cut off. It is true after an error.
func (d *Decoder) Pending() bool { return d.held() > 0 || d.hasData || d.err != nil }

// line reads one line. owned means line is d.buf, which the first data
// line of an event keeps as its data rather than copying it.
func (d *Decoder) line(line []byte, owned bool) {
	if len(line) == 0 {
		d.dispatch()
		return
	}
	if line[0] == ':' {
		return // a comment
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		n := len(value)
		if d.data != nil {
			n += len(d.data) + 1
		}
		if n > d.max() {
			d.fail()
			return
		}
		switch {
		case d.data == nil && owned:
			// value is a suffix of line, and not nil even when empty
			d.data, d.buf = line[len(line)-len(value):], nil
			d.hasData = true
			return
		case d.data == nil:
			// The event's data shares the chunk (Feed's callers never
			// change a chunk): capped at its length, so that a second
			// line, or a caller's append, copies it first.
			if value == nil {
				value = []byte{}
			}
			d.data, d.hasData = value[:len(value):len(value)], true
			return
		default:
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		// A stream repeats a few types: the last one's string is reused.
		if string(value) != d.lastTyp {
			d.lastTyp = string(value)
		}
		d.typ = d.lastTyp
		d.hasData = true
	case "id":
		d.id = string(value)
		d.hasData = true
	default:
		d.hasData = true // retry: and unknown fields still belong to an event
	}
}

// dispatch ends the current event. Per the spec an event without data is
// not dispatched.
func (d *Decoder) dispatch() {
	if d.data != nil {
		d.events = append(d.events, Event{Type: d.typ, Data: d.data, ID: d.id})
	}
	d.data, d.typ, d.id, d.hasData = nil, "", "", false
}

// AppendData appends a data-only event: "data: <data>\n\n". Data with line
// breaks (JSON a provider spread over several data: lines, relayed as it
// came) goes out as one data: line per line, which a client's decoder
// joins back with "\n".
func AppendData(dst, data []byte) []byte {
	for {
		i := lineBreak(data)
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// lineBreak is the index of data's first \r or \n, or -1.
func lineBreak(data []byte) int {
	lf := bytes.IndexByte(data, '\n')
	if cr := bytes.IndexByte(data, '\r'); cr >= 0 && (lf < 0 || cr < lf) {
		return cr
	}
	return lf
}

// AppendEvent appends a typed event: "event: <typ>\ndata: <data>\n\n".
func AppendEvent(dst []byte, typ string, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, '\n')
	return AppendData(dst, data)
}

// Whole passes a relayed stream on in whole events: it holds back the end
// of what came that is not yet a whole event (the provider's chunk edges
// fall anywhere) and passes it with the next piece, so that whoever reads
// the relayed bytes piece by piece (the gateway's report of the text)
// never meets half an event. The zero value is ready.
type Whole struct{ held []byte }

// Cut returns the whole events of what it holds and chunk; at the end
// of the stream, all of it.
func (w *Whole) Cut(chunk []byte, end bool) []byte {
	b := chunk
	if len(w.held) > 0 {
		b = append(w.held, chunk...)
		w.held = nil
	}
	if end {
		return b
	}
	n := wholeEvents(b)
	if n < len(b) {
		w.held = append([]byte(nil), b[n:]...) // chunk's bytes are the caller's
	}
	return b[:n]
}

// wholeEvents is the length of b's whole events: up to its last blank
// line (\n\n, \r\r or \r\n\r\n).
func wholeEvents(b []byte) int {
	for i := len(b) - 1; i > 0; i-- {
		if (b[i] == '\n' || b[i] == '\r') && b[i-1] == b[i] {
			return i + 1
		}
		if b[i] == '\n' && i >= 3 && b[i-1] == '\r' && b[i-2] == '\n' && b[i-3] == '\r' {
			return i + 1
		}
	}
	return 0
}
