// Package sse decodes and encodes server-sent event streams incrementally,
// following the WHATWG event-stream rules, for streams cut at arbitrary
// byte boundaries.
package sse

import "bytes"

// Event is one dispatched event.
type Event struct {
	// Type is the event: field; empty when absent.
	Type string
	// Data is the data: lines joined with "\n"; each event owns its Data.
	Data []byte
	// ID is the event's own id: field; empty when absent.
	ID string
}

// Decoder splits a byte stream into events. Its zero value is ready; it is
// not safe for concurrent use.
type Decoder struct {
	buf     []byte // bytes not yet split into lines
	data    []byte // data of the event being built
	typ, id string
	hasData bool // a field of the current event was seen
	skipLF  bool // the previous chunk ended in \r: a leading \n belongs to it
	events  []Event
}

// Feed adds a chunk and returns the events it completes. The returned slice
// is reused by the next call.
func (d *Decoder) Feed(chunk []byte) []Event {
	d.events = d.events[:0]
	if d.skipLF && len(chunk) > 0 {
		d.skipLF = false
		if chunk[0] == '\n' {
			chunk = chunk[1:]
		}
	}
	d.buf = append(d.buf, chunk...)
	rest := d.buf
	for {
		i := bytes.IndexAny(rest, "\r\n")
		if i < 0 {
			break
		}
		line := rest[:i]
		if rest[i] == '\r' {
			if i+1 == len(rest) {
				d.skipLF = true
			} else if rest[i+1] == '\n' {
				i++
			}
		}
		rest = rest[i+1:]
		d.line(line)
	}
	d.buf = append(d.buf[:0], rest...)
	return d.events
}

// Pending reports whether an incomplete event or line is held: at the end
// of a stream it means the stream was cut off.
func (d *Decoder) Pending() bool { return len(d.buf) > 0 || d.hasData }

func (d *Decoder) line(line []byte) {
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
		if d.data == nil {
			d.data = make([]byte, 0, len(value))
		} else {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		d.typ = string(value)
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

// AppendData appends a data-only event: "data: <data>\n\n". Data must not
// contain line breaks (JSON from encoding/json never does).
func AppendData(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// AppendEvent appends a typed event: "event: <typ>\ndata: <data>\n\n".
func AppendEvent(dst []byte, typ string, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, '\n')
	return AppendData(dst, data)
}
