package extproc

import (
	"crypto/rand"
	"encoding/hex"
)

// newID is a random id: prefix and n random bytes in hex.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}

// newRequestID is a random UUID (version 4), the form of Envoy's own
// request ids, which its tracing reads. Written here rather than taken
// from github.com/google/uuid, which imports database/sql/driver
// (TestExtprocHasNoConcreteStores).
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}
