package extproc

import (
	"fmt"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"modelgate/extproc/extproctest"
	"modelgate/extproc/wire"
)

// Every gateway the package's tests start speaks through checkedCodec:
// each reply the server sends and each message it reads is also put
// through protobuf, and a difference fails the test run.
func init() {
	extproctest.ServerOptions = append(extproctest.ServerOptions, grpc.ForceServerCodecV2(checkedCodec{wire.Codec()}))
}

type checkedCodec struct{ encoding.CodecV2 }

func (c checkedCodec) Marshal(v any) (mem.BufferSlice, error) {
	out, err := c.CodecV2.Marshal(v)
	if r, ok := v.(*extprocv3.ProcessingResponse); ok && err == nil {
		var back extprocv3.ProcessingResponse
		if err := proto.Unmarshal(out.Materialize(), &back); err != nil || !proto.Equal(&back, r) {
			panic(fmt.Sprintf("the codec wrote %x for %v, which protobuf reads as %v (%v)", out.Materialize(), r, &back, err))
		}
	}
	return out, err
}

func (c checkedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*extprocv3.ProcessingRequest)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	var want extprocv3.ProcessingRequest
	wantErr := proto.Unmarshal(data.Materialize(), &want)
	err := c.CodecV2.Unmarshal(data, r)
	if (err == nil) != (wantErr == nil) || err == nil && !proto.Equal(r, &want) {
		panic(fmt.Sprintf("the codec read %x as %v (%v), protobuf as %v (%v)", data.Materialize(), r, err, &want, wantErr))
	}
	return err
}
