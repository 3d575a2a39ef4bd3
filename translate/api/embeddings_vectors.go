package api

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
)

// Vectors are written straight into the response bytes: a float vector is
// copied number by number as the provider wrote it (exact, whatever the
// provider's precision), and a base64 vector is OpenAI's encoding, the
// standard base64 of the values as little-endian float32.

var (
	errNotVector     = errors.New("an embedding is not an array of numbers")
	errNotBase64     = errors.New("an embedding is not base64 of float32 values")
	errNotFloat32    = errors.New("an embedding value is out of float32 range")
	errNotFiniteJSON = errors.New("an embedding value is not finite")
)

// AppendEmbeddingsResponse appends a CreateEmbeddingResponse. Each vector
// is a JSON array of numbers or a JSON base64 string; it is converted to
// the encoding the client asked for.
func AppendEmbeddingsResponse(dst []byte, model string, vectors []json.RawMessage, b64 bool, u translate.Usage) ([]byte, error) {
	name, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	var scratch []byte
	dst = append(dst, `{"object":"list","data":[`...)
	for i, v := range vectors {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		if dst, scratch, err = appendEmbedding(dst, scratch, v, b64); err != nil {
			return nil, err
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"model":`...)
	dst = append(dst, name...)
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, u.PromptTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, u.TotalTokens, 10)
	return append(dst, "}}"...), nil
}

// appendEmbedding appends one vector in the client's encoding; scratch is
// reused for the float32 bytes.
func appendEmbedding(dst, scratch []byte, v json.RawMessage, b64 bool) ([]byte, []byte, error) {
	v = jsonscan.TrimSpace(v)
	switch {
	case len(v) > 0 && v[0] == '"':
		enc := v[1 : len(v)-1]
		if bytes.IndexByte(enc, '\\') >= 0 { // base64 needs no escapes, but JSON allows "\/"
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, scratch, errNotBase64
			}
			enc = []byte(s)
		}
		if !b64 {
			return appendBase64AsFloats(dst, scratch, enc)
		}
		if !isBase64([]byte(enc)) {
			return nil, scratch, errNotBase64
		}
		return append(dst, v...), scratch, nil
	case b64:
		var err error
		if scratch, err = appendFloat32Bytes(scratch[:0], v); err != nil {
			return nil, scratch, err
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, scratch)
		return append(dst, '"'), scratch, nil
	}
	dst, err := appendNumbers(dst, v)
	return dst, scratch, err
}

// appendNumbers copies a JSON array of numbers without its whitespace.
func appendNumbers(dst []byte, v []byte) ([]byte, error) {
	dst = append(dst, '[')
	it := numbers{b: v}
	for n := 0; ; n++ {
		num, ok, err := it.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return append(dst, ']'), nil
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, num...)
	}
}

// appendFloat32Bytes appends the little-endian float32 bytes of a JSON
// array of numbers, each rounded to the nearest float32 as OpenAI's
// vectors are.
func appendFloat32Bytes(dst []byte, v []byte) ([]byte, error) {
	it := numbers{b: v}
	for {
		num, ok, err := it.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return dst, nil
		}
		f, err := strconv.ParseFloat(string(num), 32)
		if err != nil { // out of range; the syntax was checked
			return nil, errNotFloat32
		}
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f)))
	}
}

// appendBase64AsFloats appends the JSON array of the float32 values a
// base64 vector holds.
func appendBase64AsFloats(dst, scratch, enc []byte) ([]byte, []byte, error) {
	raw, err := base64.StdEncoding.AppendDecode(scratch[:0], enc)
	if err != nil || len(raw)%4 != 0 {
		return nil, raw, errNotBase64
	}
	dst = append(dst, '[')
	for i := 0; i < len(raw); i += 4 {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = appendFloat32(dst, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))); err != nil {
			return nil, raw, err
		}
	}
	return append(dst, ']'), raw, nil
}

// appendFloat32 writes f as encoding/json does: the shortest decimal that
// reads back as the same float32, in exponent form only for very small or
// large magnitudes.
func appendFloat32(dst []byte, f float32) ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return nil, errNotFiniteJSON
	}
	format := byte('f')
	if abs := math.Abs(float64(f)); abs != 0 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, float64(f), format, -1, 32)
	if format == 'e' { // e-07 → e-7
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// numbers iterates over a JSON array of numbers, checking the syntax of
// each.
type numbers struct {
	b []byte
	i int
}

// next returns the next number, or ok false at the array's end.
func (a *numbers) next() (num []byte, ok bool, err error) {
	b := a.b
	a.skipSpace()
	if a.i == 0 {
		if len(b) == 0 || b[0] != '[' {
			return nil, false, errNotVector
		}
		a.i++
		a.skipSpace()
		if a.i < len(b) && b[a.i] == ']' {
			return nil, false, a.end()
		}
	} else {
		switch {
		case a.i < len(b) && b[a.i] == ']':
			return nil, false, a.end()
		case a.i < len(b) && b[a.i] == ',':
			a.i++
			a.skipSpace()
		default:
			return nil, false, errNotVector
		}
	}
	start := a.i
	a.i = scanNumber(b, a.i)
	if a.i == start {
		return nil, false, errNotVector
	}
	num = b[start:a.i]
	a.skipSpace()
	return num, true, nil
}

// end checks that nothing follows the closing bracket.
func (a *numbers) end() error {
	a.i++
	a.skipSpace()
	if a.i != len(a.b) {
		return errNotVector
	}
	return nil
}

func (a *numbers) skipSpace() { a.i = jsonscan.SkipSpace(a.b, a.i) }

// scanNumber returns the end of the JSON number at b[i:], or i when there
// is none: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return start
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return start
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		j := i + 1
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if k := digits(b, j); k > j {
			i = k
		} else {
			return start
		}
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
