package wire

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Codec is gRPC's proto codec with the ext_proc messages the server
// (modelgate/extproc) writes and reads most handled directly (wire.go):
// every reply it builds except immediate responses, and the headers and
// bodies Envoy sends. Anything else goes to the proto codec. The gRPC
// server installs it with grpc.ForceServerCodecV2.
func Codec() encoding.CodecV2 { return codec{encoding.GetCodecV2(proto.Name)} }

type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*extprocv3.ProcessingResponse); ok {
		if n, ok := sizeReply(r); ok {
			if mem.IsBelowBufferPoolingThreshold(n) {
				if b := make([]byte, n); writeReply(b, r) {
					return smallReply(b), nil
				}
			} else {
				pool := mem.DefaultBufferPool()
				buf := pool.Get(n)
				if writeReply(*buf, r) {
					return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
				}
				pool.Put(buf)
			}
		}
	}
	return c.proto.Marshal(v)
}

// smallReply is b as the one buffer of a slice, in one allocation where
// a SliceBuffer in an interface and the slice holding it take two. A
// SliceBuffer's Free does nothing; the garbage collector takes b.
func smallReply(b []byte) mem.BufferSlice {
	r := &struct {
		slice [1]mem.Buffer
		buf   mem.SliceBuffer
	}{buf: b}
	r.slice[0] = &r.buf
	return r.slice[:]
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*extprocv3.ProcessingRequest); ok && unmarshalRequest(own(data), r) {
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// own returns data's bytes for a decoded message to keep (its header
// strings and bodies are over them). gRPC frees data once Unmarshal
// returns, and a pooled buffer is then used again, so data is copied,
// unless it is one SliceBuffer: gRPC reads a frame under its pooling
// threshold (most of Envoy's messages) into a slice of its own, which
// nothing uses again or writes to, and its Free does nothing.
func own(data mem.BufferSlice) []byte {
	if len(data) == 1 {
		if b, ok := data[0].(mem.SliceBuffer); ok {
			return b
		}
	}
	return data.Materialize()
}

func (c codec) Name() string { return c.proto.Name() }
