package extproc

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// The shortcut writes the bytes protobuf writes, for every body length
// (each length prefix crosses varint sizes at 128 and 16384).
func TestCodecChunkReplyIsProtobufs(t *testing.T) {
	c := Codec()
	for _, n := range []int{0, 1, 100, 123, 124, 125, 127, 128, 300, 16370, 16384, 1 << 20} {
		body := bytes.Repeat([]byte("x"), n)
		reply := newChunkReply().with(body)
		want, err := proto.Marshal(reply)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Marshal(reply)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want) {
			t.Errorf("body of %d bytes: codec wrote %d bytes, protobuf %d", n, len(got.Materialize()), len(want))
		}
		var back extprocv3.ProcessingResponse
		if err := proto.Unmarshal(got.Materialize(), &back); err != nil || !proto.Equal(&back, reply) {
			t.Errorf("body of %d bytes does not decode to the reply: %v", n, err)
		}
	}
}

// Any other reply, or a chunk reply with anything more, goes through
// protobuf whole.
func TestCodecOtherRepliesUnchanged(t *testing.T) {
	more := []func(r *extprocv3.ProcessingResponse){
		func(r *extprocv3.ProcessingResponse) { r.DynamicMetadata = &structpb.Struct{} },
		func(r *extprocv3.ProcessingResponse) { r.ModeOverride = streamedOverride() },
		func(r *extprocv3.ProcessingResponse) { r.OverrideMessageTimeout = durationpb.New(1) },
		//lint:ignore SA1019 a deprecated field set still goes on the wire
		func(r *extprocv3.ProcessingResponse) { r.RequestDrain = true },
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.HeaderMutation = (&headers{}).mutation()
		},
		func(r *extprocv3.ProcessingResponse) { r.GetResponseBody().Response.ClearRouteCache = true },
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
		},
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.BodyMutation.Mutation = &extprocv3.BodyMutation_ClearBody{ClearBody: true}
		},
	}
	for i, add := range more {
		r := newChunkReply().with([]byte("data: x\n\n"))
		add(r)
		if _, ok := chunkBody(r); ok {
			t.Errorf("change %d: taken as a plain chunk reply", i)
		}
		got, err := Codec().Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(r)
		if !bytes.Equal(got.Materialize(), want) {
			t.Errorf("change %d: codec bytes differ from protobuf's", i)
		}
	}
	if _, ok := chunkBody(errorResponse(errMissingAPIKey())); ok {
		t.Error("an immediate response was taken as a chunk reply")
	}
}

// chunkBody names every field of the messages on the reply's path; a new
// field in go-control-plane must be looked at before the shortcut may
// skip it.
func TestCodecKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{extprocv3.ProcessingResponse{}, []string{"Response", "DynamicMetadata", "TypedDynamicMetadata", "ModeOverride", "RequestDrain",
			"RequestDrainRequests", "RequestDrainResponses", "OverrideMessageTimeout", "ServerWindowUpdate"}},
		{extprocv3.BodyResponse{}, []string{"Response"}},
		{extprocv3.CommonResponse{}, []string{"Status", "HeaderMutation", "BodyMutation", "Trailers", "ClearRouteCache"}},
		{extprocv3.BodyMutation{}, []string{"Mutation"}},
	} {
		var got []string
		typ := reflect.TypeOf(tc.v)
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() {
				got = append(got, f.Name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s fields %v, the codec knows %v", typ.Name(), got, tc.want)
		}
	}
}

func BenchmarkChunkReplyMarshal(b *testing.B) {
	body := bytes.Repeat([]byte("y"), 300)
	for _, c := range []struct {
		name string
		m    func(v any) error
	}{
		{"codec", func(v any) error { _, err := Codec().Marshal(v); return err }},
		{"grpc-proto", func(v any) error { _, err := encoding.GetCodecV2(grpcproto.Name).Marshal(v); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := newChunkReply().with(body)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.m(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
