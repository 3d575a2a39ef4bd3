package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// String decoding and encoding for the stream fast paths, which copy a
// provider's text into their output without json.Unmarshal and
// json.Marshal: what these read and write is byte for byte what
// encoding/json would, which fuzz tests hold them to.

// AppendQuoted appends s as a JSON string, escaped as encoding/json
// escapes it: <, > and & as \u003c and so on, U+2028 and U+2029, and
// each byte of invalid UTF-8 as \ufffd.
func AppendQuoted[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if marshalsAsIs[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendMarshaledASCII(dst, b)
			i++
			start = i
			continue
		}
		// As encoding/json: a few bytes as a string, which stays on the
		// stack, whether s is a string or bytes.
		r, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = appendMarshaledSeparator(dst, r)
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendTokenBody appends the text of tok, a string token of valid JSON
// (quotes included, as Cursor.StringToken returns it), escaped as
// encoding/json escapes it but without the quotes: the bytes between the
// quotes of json.Marshal of the string json.Unmarshal reads from tok. So
// the bodies of several tokens appended in a row are the body of their
// concatenation, and a translator copies a provider's text into its
// chunk without decoding it.
func AppendTokenBody(dst, tok []byte) []byte {
	if len(tok) < 2 {
		return dst
	}
	s := tok[1 : len(tok)-1]
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if marshalsAsIs[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			if b != '\\' {
				dst = appendMarshaledASCII(dst, b)
				i++
			} else {
				r, n := unescape(s[i:])
				dst = appendMarshaledRune(dst, r)
				i += n
			}
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// The decoder reads a byte that is not UTF-8 as U+FFFD,
			// which is then written as it is.
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			start = i + 1
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = appendMarshaledSeparator(dst, r)
			start = i + size
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// Unquote is the text of tok, a string token of valid JSON (nil, or any
// other value, is no text), decoded as json.Unmarshal decodes it: escapes
// read, an unpaired surrogate or a byte of invalid UTF-8 made U+FFFD. It
// is a part of tok when that holds nothing to decode, which is the usual,
// else decoded into *scratch, so it is valid until the next call with the
// same scratch.
func Unquote(tok []byte, scratch *[]byte) []byte {
	if len(tok) < 2 || tok[0] != '"' {
		return nil
	}
	s := tok[1 : len(tok)-1]
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '\\' {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	b := append((*scratch)[:0], s[:i]...)
	for i < len(s) {
		switch c := s[i]; {
		case c == '\\':
			r, n := unescape(s[i:])
			b = utf8.AppendRune(b, r)
			i += n
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:]) // U+FFFD for a byte of invalid UTF-8
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	*scratch = b
	return b
}

// IsText reports whether tok, a JSON value, is a string whose text (what
// json.Unmarshal reads from it) is s. It decodes as it compares, so it
// allocates nothing and stops at the first difference.
func IsText(tok []byte, s string) bool {
	if len(tok) < 2 || tok[0] != '"' {
		return false
	}
	return bodyIs(tok[1:len(tok)-1], s)
}

// bodyIs is IsText of a string token's body, without its quotes (a
// Member's Key).
func bodyIs(body []byte, s string) bool {
	for i := 0; i < len(body); {
		if c := body[i]; c < utf8.RuneSelf && c != '\\' {
			if len(s) == 0 || s[0] != c {
				return false
			}
			s, i = s[1:], i+1
			continue
		}
		var r rune
		var n int
		if body[i] == '\\' {
			r, n = unescape(body[i:])
		} else {
			r, n = utf8.DecodeRune(body[i:]) // U+FFFD for a byte of invalid UTF-8
		}
		var enc [utf8.UTFMax]byte
		e := utf8.AppendRune(enc[:0], r)
		if len(s) < len(e) || s[:len(e)] != string(e) {
			return false
		}
		s, i = s[len(e):], i+n
	}
	return len(s) == 0
}

// unescape reads the escape at the start of s as encoding/json does: a
// \u escape of half a surrogate pair takes the other half along, or is
// U+FFFD. It returns the rune and the bytes read. The usual escapes are
// looked up in a table, faster than a switch; \u ones take unescapeHex.
func unescape(s []byte) (rune, int) {
	if len(s) > 1 {
		if c := unescaped[s[1]]; c != 0 {
			return rune(c), 2
		}
	}
	return unescapeHex(s)
}

// unescaped[c] is the byte the escape \c stands for, 0 for none.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescapeHex reads a \u escape (or pair) at the start of s.
func unescapeHex(s []byte) (rune, int) {
	r := rune(-1)
	if len(s) >= 2 && s[1] == 'u' {
		r = hex4(s[2:])
	}
	if r < 0 {
		return utf8.RuneError, len(s) // not in valid JSON
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if r2 := hex4(s[8:]); r2 >= 0 {
			if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
				return pair, 12
			}
		}
	}
	return utf8.RuneError, 6
}

// hex4 is the value of the four hex digits that start s, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// appendMarshaledRune appends a decoded rune as encoding/json writes it.
func appendMarshaledRune(dst []byte, r rune) []byte {
	switch {
	case r < utf8.RuneSelf && marshalsAsIs[r]:
		return append(dst, byte(r))
	case r < utf8.RuneSelf:
		return appendMarshaledASCII(dst, byte(r))
	case r == '\u2028' || r == '\u2029':
		return appendMarshaledSeparator(dst, r)
	}
	return utf8.AppendRune(dst, r)
}

// marshalsAsIs[b] reports whether encoding/json writes the byte b, ASCII,
// as it is. A table, as encoding/json has, is the fastest test of the
// bytes of a text.
var marshalsAsIs = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

func appendMarshaledASCII(dst []byte, b byte) []byte {
	const hex = "0123456789abcdef"
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
}

func appendMarshaledSeparator(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', '2', '0', '2', byte('0'+r&0xF))
}
