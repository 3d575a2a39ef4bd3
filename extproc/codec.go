package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Codec is gRPC's proto codec with the ext_proc messages this server
// writes and reads most handled directly (wire.go): every reply it builds
// except immediate responses, and the headers and bodies Envoy sends.
// Anything else goes to the proto codec. Serve installs it with
// grpc.ForceServerCodecV2.
func Codec() encoding.CodecV2 { return codec{encoding.GetCodecV2(proto.Name)} }

type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*extprocv3.ProcessingResponse); ok {
		if n, ok := sizeReply(r); ok {
			if mem.IsBelowBufferPoolingThreshold(n) {
				if b := make([]byte, n); writeReply(b, r) {
					return mem.BufferSlice{mem.SliceBuffer(b)}, nil
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

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*extprocv3.ProcessingRequest); ok && unmarshalRequest(data.Materialize(), r) {
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (c codec) Name() string { return c.proto.Name() }
