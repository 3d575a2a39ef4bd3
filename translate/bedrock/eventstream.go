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
	end := len(f) - 4
	if crc32.ChecksumIEEE(f[:end]) != binary.BigEndian.Uint32(f[end:]) {
		return Message{}, fmt.Errorf("%w: message checksum mismatch", ErrCorrupt)
	}
	headersLen := int(binary.BigEndian.Uint32(f[4:8]))
	headers, err := decodeHeaders(f[preludeLen : preludeLen+headersLen])
	if err != nil {
		return Message{}, err
	}
	return Message{Headers: headers, Payload: f[preludeLen+headersLen : end]}, nil
}

func decodeHeaders(b []byte) ([]Header, error) {
	var out []Header
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n+1 {
			return nil, fmt.Errorf("%w: truncated header name", ErrCorrupt)
		}
		h := Header{Name: string(b[1 : 1+n]), Type: b[1+n]}
		rest, err := h.decodeValue(b[2+n:])
		if err != nil {
			return nil, err
		}
		out, b = append(out, h), rest
	}
	return out, nil
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

func (h *Header) decodeValue(b []byte) ([]byte, error) {
	if n, fixed := fixedSize(h.Type); fixed {
		if len(b) < n {
			return nil, fmt.Errorf("%w: truncated header %q", ErrCorrupt, h.Name)
		}
		h.Value = fixedValue(h.Type, b[:n])
		return b[n:], nil
	}
	if h.Type != 6 && h.Type != 7 {
		return nil, fmt.Errorf("%w: header %q has unknown type %d", ErrCorrupt, h.Name, h.Type)
	}
	if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
		return nil, fmt.Errorf("%w: truncated header %q", ErrCorrupt, h.Name)
	}
	n := int(binary.BigEndian.Uint16(b))
	if h.Type == 7 {
		h.Value = string(b[2 : 2+n])
	} else {
		h.Value = append([]byte(nil), b[2:2+n]...)
	}
	return b[2+n:], nil
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
