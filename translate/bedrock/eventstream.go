package bedrock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// An event-stream frame (application/vnd.amazon.eventstream): a 12-byte
// prelude (total length, headers length, CRC32 of those 8 bytes), headers,
// payload, and a CRC32 of everything before it.
const (
	preludeLen  = 12
	minFrameLen = preludeLen + 4
	// maxFrameLen bounds one frame (AWS allows 16 MiB payloads).
	maxFrameLen = 16<<20 + 128<<10
)

// Message is one decoded frame.
type Message struct {
	Headers []Header
	Payload []byte
}

// Header is one frame header; Value is bool, int8, int16, int32, int64,
// []byte (types 6 and 9), string, or int64 milliseconds (timestamp, 8).
type Header struct {
	Name  string
	Type  byte
	Value any
}

// Header returns the string value of a header, or "".
func (m Message) Header(name string) string {
	for _, h := range m.Headers {
		if h.Name == name {
			if s, ok := h.Value.(string); ok {
				return s
			}
		}
	}
	return ""
}

// ErrCorrupt is a frame whose lengths or checksums do not hold.
var ErrCorrupt = errors.New("corrupt event-stream frame")

// Decoder splits a byte stream cut at arbitrary points into frames. Its
// zero value is ready; after an error it stays failed.
type Decoder struct {
	buf []byte
	err error
}

// Feed adds bytes and returns the frames they complete.
func (d *Decoder) Feed(chunk []byte) ([]Message, error) {
	if d.err != nil {
		return nil, d.err
	}
	d.buf = append(d.buf, chunk...)
	var out []Message
	for len(d.buf) >= preludeLen {
		total := int(binary.BigEndian.Uint32(d.buf[0:4]))
		if err := checkPrelude(d.buf, total); err != nil {
			d.err = err
			return out, err
		}
		if len(d.buf) < total {
			break
		}
		m, err := decodeFrame(d.buf[:total])
		if err != nil {
			d.err = err
			return out, err
		}
		out = append(out, m)
		d.buf = d.buf[total:]
	}
	if len(d.buf) == 0 {
		d.buf = d.buf[:0:0] // let a long stream's buffer go
	}
	return out, nil
}

// Pending reports whether an incomplete frame is held.
func (d *Decoder) Pending() bool { return len(d.buf) > 0 }

func checkPrelude(b []byte, total int) error {
	headersLen := int(binary.BigEndian.Uint32(b[4:8]))
	if crc32.ChecksumIEEE(b[0:8]) != binary.BigEndian.Uint32(b[8:12]) {
		return fmt.Errorf("%w: prelude checksum mismatch", ErrCorrupt)
	}
	if total < minFrameLen || total > maxFrameLen || headersLen > total-minFrameLen {
		return fmt.Errorf("%w: frame length %d, headers length %d", ErrCorrupt, total, headersLen)
	}
	return nil
}

func decodeFrame(f []byte) (Message, error) {
	raw, err := checkFrame(f)
	if err != nil {
		return Message{}, err
	}
	headers, err := decodeHeaders(raw.headers)
	if err != nil {
		return Message{}, err
	}
	return Message{Headers: headers, Payload: raw.payload}, nil
}

// rawFrame is a checked frame whose headers are left encoded: the stream
// translator reads the few it needs with header, without allocating.
type rawFrame struct {
	headers, payload []byte
}

// checkFrame checks a whole frame's message checksum and headers.
func checkFrame(f []byte) (rawFrame, error) {
	end := len(f) - 4
	if crc32.ChecksumIEEE(f[:end]) != binary.BigEndian.Uint32(f[end:]) {
		return rawFrame{}, fmt.Errorf("%w: message checksum mismatch", ErrCorrupt)
	}
	headersLen := int(binary.BigEndian.Uint32(f[4:8]))
	raw := rawFrame{headers: f[preludeLen : preludeLen+headersLen], payload: f[preludeLen+headersLen : end]}
	if err := walkHeaders(raw.headers, func([]byte, byte, []byte) bool { return true }); err != nil {
		return rawFrame{}, err
	}
	return raw, nil
}

// header returns the value of the frame's first string header called
// name, as Message.Header does, or nil.
func (f rawFrame) header(name string) []byte {
	var value []byte
	walkHeaders(f.headers, func(n []byte, typ byte, v []byte) bool { //nolint:errcheck // checked by checkFrame
		if typ == 7 && string(n) == name {
			value = v
			return false
		}
		return true
	})
	return value
}

// each checks the frames that chunk completes and hands each to f, which
// must be done with it when it returns. Unlike Feed it copies no more of
// chunk than the start of a frame that chunk's end cuts, so a chunk of
// whole frames costs no allocation.
func (d *Decoder) each(chunk []byte, f func(rawFrame)) error {
	if d.err != nil {
		return d.err
	}
	if len(d.buf) > 0 { // complete the frame held from the last chunk first
		held, rest, whole, err := d.complete(chunk)
		if err != nil || !whole {
			return err
		}
		f(held)
		chunk = rest
		if cap(d.buf) > keepFrameBuf {
			d.buf = nil
		} else {
			d.buf = d.buf[:0]
		}
	}
	for len(chunk) >= preludeLen {
		total := int(binary.BigEndian.Uint32(chunk[0:4]))
		if err := checkPrelude(chunk, total); err != nil {
			d.err = err
			return err
		}
		if len(chunk) < total {
			break
		}
		raw, err := checkFrame(chunk[:total])
		if err != nil {
			d.err = err
			return err
		}
		f(raw)
		chunk = chunk[total:]
	}
	d.buf = append(d.buf, chunk...)
	return nil
}

// keepFrameBuf is the largest buffer each keeps for the next cut frame.
const keepFrameBuf = 64 << 10

// complete adds to the held start of a frame what chunk has of its rest,
// and returns the frame once whole, and the rest of chunk.
func (d *Decoder) complete(chunk []byte) (rawFrame, []byte, bool, error) {
	if len(d.buf) < preludeLen {
		n := min(preludeLen-len(d.buf), len(chunk))
		d.buf, chunk = append(d.buf, chunk[:n]...), chunk[n:]
		if len(d.buf) < preludeLen {
			return rawFrame{}, nil, false, nil
		}
	}
	total := int(binary.BigEndian.Uint32(d.buf[0:4]))
	if err := checkPrelude(d.buf, total); err != nil {
		d.err = err
		return rawFrame{}, nil, false, err
	}
	n := min(total-len(d.buf), len(chunk))
	d.buf, chunk = append(d.buf, chunk[:n]...), chunk[n:]
	if len(d.buf) < total {
		return rawFrame{}, nil, false, nil
	}
	raw, err := checkFrame(d.buf)
	if err != nil {
		d.err = err
		return rawFrame{}, nil, false, err
	}
	return raw, chunk, true, nil
}

func decodeHeaders(b []byte) ([]Header, error) {
	var out []Header
	err := walkHeaders(b, func(name []byte, typ byte, v []byte) bool {
		out = append(out, Header{Name: string(name), Type: typ, Value: headerValue(typ, v)})
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walkHeaders checks encoded headers and hands each one's name, type and
// encoded value (without a length) to f until f returns false.
func walkHeaders(b []byte, f func(name []byte, typ byte, value []byte) bool) error {
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n+1 {
			return fmt.Errorf("%w: truncated header name", ErrCorrupt)
		}
		name, typ := b[1:1+n], b[1+n]
		value, rest, err := headerValueBytes(name, typ, b[2+n:])
		if err != nil {
			return err
		}
		if !f(name, typ, value) {
			return nil
		}
		b = rest
	}
	return nil
}

// fixedSize is the value size of the fixed-width header types.
func fixedSize(t byte) (int, bool) {
	switch t {
	case 0, 1:
		return 0, true
	case 2:
		return 1, true
	case 3:
		return 2, true
	case 4:
		return 4, true
	case 5, 8:
		return 8, true
	case 9:
		return 16, true
	}
	return 0, false
}

// headerValueBytes splits a header's value of type t from the headers
// after it.
func headerValueBytes(name []byte, t byte, b []byte) (value, rest []byte, err error) {
	if n, fixed := fixedSize(t); fixed {
		if len(b) < n {
			return nil, nil, fmt.Errorf("%w: truncated header %q", ErrCorrupt, name)
		}
		return b[:n], b[n:], nil
	}
	if t != 6 && t != 7 {
		return nil, nil, fmt.Errorf("%w: header %q has unknown type %d", ErrCorrupt, name, t)
	}
	if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
		return nil, nil, fmt.Errorf("%w: truncated header %q", ErrCorrupt, name)
	}
	n := int(binary.BigEndian.Uint16(b))
	return b[2 : 2+n], b[2+n:], nil
}

// headerValue is the Go value of a header's value of type t.
func headerValue(t byte, v []byte) any {
	switch t {
	case 6:
		return append([]byte(nil), v...)
	case 7:
		return string(v)
	}
	return fixedValue(t, v)
}

func fixedValue(t byte, b []byte) any {
	switch t {
	case 0:
		return true
	case 1:
		return false
	case 2:
		return int8(b[0])
	case 3:
		return int16(binary.BigEndian.Uint16(b))
	case 4:
		return int32(binary.BigEndian.Uint32(b))
	case 9:
		return append([]byte(nil), b...)
	}
	return int64(binary.BigEndian.Uint64(b)) // int64 and timestamp
}
