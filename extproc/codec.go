package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Codec is gRPC's proto codec with one shortcut: the reply that replaces
// a streamed chunk (most of a stream's messages) is written directly,
// four lengths around the body, instead of through protobuf's reflection
// (about a microsecond a message). Everything else goes to the proto
// codec. Serve installs it with grpc.ForceServerCodecV2; the result is
// the same bytes either way (codec_test.go holds it to proto.Marshal).
func Codec() encoding.CodecV2 { return codec{encoding.GetCodecV2(proto.Name)} }

type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*extprocv3.ProcessingResponse); ok {
		if body, ok := chunkBody(r); ok {
			return mem.BufferSlice{mem.SliceBuffer(appendChunkReply(nil, body))}, nil
		}
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c codec) Name() string { return c.proto.Name() }

// chunkBody returns the body of a reply that only replaces a response
// body chunk: {response_body: {response: {body_mutation: {body}}}} and no
// other field (codec_test.go fails when these messages gain fields).
func chunkBody(r *extprocv3.ProcessingResponse) ([]byte, bool) {
	rb, ok := r.GetResponse().(*extprocv3.ProcessingResponse_ResponseBody)
	//lint:ignore SA1019 a deprecated field set still goes on the wire
	if !ok || r.DynamicMetadata != nil || r.TypedDynamicMetadata != nil || r.ModeOverride != nil || r.RequestDrain ||
		r.RequestDrainRequests || r.RequestDrainResponses || r.OverrideMessageTimeout != nil || r.ServerWindowUpdate != nil {
		return nil, false
	}
	common := rb.ResponseBody.GetResponse()
	if common == nil || common.Status != extprocv3.CommonResponse_CONTINUE || common.HeaderMutation != nil ||
		common.Trailers != nil || common.ClearRouteCache {
		return nil, false
	}
	// Unknown fields are not looked at: replies are built by this server,
	// never decoded, so they have none.
	body, ok := common.GetBodyMutation().GetMutation().(*extprocv3.BodyMutation_Body)
	if !ok {
		return nil, false
	}
	return body.Body, true
}

// Field numbers of the chunk reply's path (external_processor.proto).
const (
	fieldResponseBody = 4 // ProcessingResponse.response_body
	fieldResponse     = 1 // BodyResponse.response
	fieldBodyMutation = 3 // CommonResponse.body_mutation
	fieldBody         = 1 // BodyMutation.body
)

// appendChunkReply appends the wire form of a chunk reply with body.
func appendChunkReply(dst, body []byte) []byte {
	mutation := sizeField(fieldBody, len(body))
	common := sizeField(fieldBodyMutation, mutation)
	response := sizeField(fieldResponse, common)
	total := sizeField(fieldResponseBody, response)
	if dst == nil {
		dst = make([]byte, 0, total)
	}
	dst = appendHead(dst, fieldResponseBody, response)
	dst = appendHead(dst, fieldResponse, common)
	dst = appendHead(dst, fieldBodyMutation, mutation)
	dst = appendHead(dst, fieldBody, len(body))
	return append(dst, body...)
}

// sizeField is the size of a length-delimited field holding n bytes.
func sizeField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func appendHead(dst []byte, num protowire.Number, n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.BytesType), uint64(n))
}
