package wire

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// deterministic is protobuf's wire form with maps in key order.
func deterministic(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wireReply is the reply's wire form from sizeReply and writeReply,
// which must fill it.
func wireReply(t testing.TB, r *extprocv3.ProcessingResponse) ([]byte, bool) {
	t.Helper()
	n, ok := sizeReply(r)
	if !ok {
		return nil, false
	}
	b := make([]byte, n)
	if !writeReply(b, r) {
		t.Fatalf("writeReply did not fill the %d bytes sizeReply gave", n)
	}
	return b, true
}

// testMutation is a header mutation as the server builds them: raw
// values, no append.
func testMutation() *extprocv3.HeaderMutation {
	var set []*corev3.HeaderValueOption
	for _, kv := range [][2]string{{":path", "/v1/chat/completions"}, {"authorization", "Bearer sk-provider"}, {"content-length", "620"}, {"x-ünïcode", "välue"}} {
		set = append(set, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])}})
	}
	return &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: []string{"x-api-key", "modelgate-key"}}
}

// bodyReply is the server's reply to a body replaced with body, with a
// header mutation.
func bodyReply(body []byte, mut *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
		Response: &extprocv3.CommonResponse{BodyMutation: bodyMutation(body), HeaderMutation: mut}}}}
}

// chunkReply is the server's reply to a streamed chunk, replaced with body.
func chunkReply(body []byte) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
		Response: &extprocv3.CommonResponse{BodyMutation: bodyMutation(body)}}}}
}

func bodyMutation(body []byte) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}
}

// streamedOverride is the server's switch of the response body to STREAMED.
func streamedOverride() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_STREAMED}
}

// errorReply is an error as the server answers it, an immediate response.
func errorReply() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
		Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "content-type", RawValue: []byte("application/json")}}}},
		Body:    []byte(`{"error":{"message":"You didn't provide an API key. Provide your API key in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY), or in an x-api-key header.","type":"authentication_error","param":null,"code":"invalid_api_key"}}`),
		Details: "modelgate_401",
	}}}
}

// The replies the server builds, written as protobuf writes them.
func TestReplyWireIsProtobufs(t *testing.T) {
	replies := map[string]*extprocv3.ProcessingResponse{
		"empty":            {},
		"request headers":  {Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: testMutation(), ClearRouteCache: true}}}},
		"no common":        {Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}},
		"request body":     {Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE, HeaderMutation: testMutation(), BodyMutation: bodyMutation([]byte(`{"model":"m"}`))}}}},
		"response headers": {Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: testMutation()}}}, ModeOverride: streamedOverride()},
		"clear body":       {Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{}}}}}},
		"empty mutation":   {Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{}, HeaderMutation: &extprocv3.HeaderMutation{}}}}},
		"all modes":        {ModeOverride: &filterv3.ProcessingMode{RequestHeaderMode: 1, ResponseHeaderMode: 2, RequestBodyMode: 3, ResponseBodyMode: 4, RequestTrailerMode: 1, ResponseTrailerMode: -1}},
		"option fields": {Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			{}, {Header: &corev3.HeaderValue{}}, {Header: &corev3.HeaderValue{Key: "k", Value: "v"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, KeepEmptyValue: true},
		}}}}}},
	}
	body := bodyReply([]byte(`{"id":"chatcmpl-1","object":"chat.completion"}`), testMutation())
	body.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"io.modelgate": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"model": structpb.NewStringValue("gpt-4o"), "backend": structpb.NewStringValue("openai"), "account_id": structpb.NewStringValue(""),
		"prompt_tokens": structpb.NewNumberValue(12), "completion_tokens": structpb.NewNumberValue(0), "total_tokens": structpb.NewNumberValue(math.Inf(1)),
		"null": structpb.NewNullValue(), "yes": structpb.NewBoolValue(true), "no": structpb.NewBoolValue(false), "unset": {},
		"list":  structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(-0.5), structpb.NewStringValue("ä"), structpb.NewListValue(&structpb.ListValue{})}}),
		"empty": structpb.NewStructValue(&structpb.Struct{}),
	}})}}
	replies["final body"] = body
	for _, n := range []int{0, 1, 100, 123, 124, 125, 127, 128, 300, 16370, 16384, 1 << 20} {
		replies[fmt.Sprintf("chunk of %d bytes", n)] = chunkReply(bytes.Repeat([]byte("x"), n))
	}
	for name, r := range replies {
		got, ok := wireReply(t, r)
		if !ok {
			t.Errorf("%s: declined", name)
			continue
		}
		if err := protobufWrites(got, r); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// protobufWrites reports how got is not r's wire form as protobuf writes
// it: the same bytes, but for the order of map entries, which protobuf
// takes from the map unless it is made deterministic.
func protobufWrites(got []byte, r *extprocv3.ProcessingResponse) error {
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil || bytes.Equal(got, want) {
		return err
	}
	var back extprocv3.ProcessingResponse
	if err := proto.Unmarshal(got, &back); err != nil {
		return fmt.Errorf("wrote %x, which protobuf does not read: %v", got, err)
	}
	if !proto.Equal(&back, r) || len(got) != len(want) {
		return fmt.Errorf("wrote\n%x\nprotobuf writes\n%x", got, want)
	}
	if again, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(&back); !bytes.Equal(again, want) {
		return fmt.Errorf("wrote %x, which protobuf writes back as %x, not %x", got, again, want)
	}
	return nil
}

// What only protobuf writes is declined, and the codec's bytes are then
// protobuf's.
func TestReplyWireDeclines(t *testing.T) {
	declined := []func(r *extprocv3.ProcessingResponse){
		func(r *extprocv3.ProcessingResponse) { r.Response = errorReply().Response },
		func(r *extprocv3.ProcessingResponse) {
			r.Response = &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}
		},
		func(r *extprocv3.ProcessingResponse) { r.Response = &extprocv3.ProcessingResponse_RequestBody{} },
		func(r *extprocv3.ProcessingResponse) { r.OverrideMessageTimeout = durationpb.New(1) },
		//lint:ignore SA1019 a deprecated field set still goes on the wire
		func(r *extprocv3.ProcessingResponse) { r.RequestDrain = true },
		func(r *extprocv3.ProcessingResponse) { r.RequestDrainResponses = true },
		func(r *extprocv3.ProcessingResponse) {
			r.ServerWindowUpdate = &extprocv3.ProcessingResponse_ServerWindowUpdate{}
		},
		func(r *extprocv3.ProcessingResponse) { r.GetResponseBody().Response.Trailers = &corev3.HeaderMap{} },
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.BodyMutation.Mutation = &extprocv3.BodyMutation_StreamedResponse{}
		},
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.HeaderMutation = &extprocv3.HeaderMutation{RemoveHeaders: []string{"x-\xff"}}
		},
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{nil}}
		},
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "k"}, Append: wrapperspb.Bool(true)}}}
		},
		func(r *extprocv3.ProcessingResponse) {
			r.GetResponseBody().Response.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "k", Value: "\xc3"}}}}
		},
		func(r *extprocv3.ProcessingResponse) {
			r.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"ns": structpb.NewStringValue("\xc3(")}}
		},
		func(r *extprocv3.ProcessingResponse) {
			r.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"ns": nil}}
		},
		func(r *extprocv3.ProcessingResponse) {
			r.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"ns": {Kind: &structpb.Value_StructValue{}}}}
		},
	}
	for i, change := range declined {
		r := chunkReply([]byte("data: x\n\n"))
		change(r)
		if _, ok := sizeReply(r); ok {
			t.Errorf("change %d: not declined", i)
		}
		got, gotErr := Codec().Marshal(r)
		want, wantErr := encoding.GetCodecV2(grpcproto.Name).Marshal(r)
		if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got.Materialize(), want.Materialize()) {
			t.Errorf("change %d: codec wrote %x (%v), protobuf %x (%v)", i, got.Materialize(), gotErr, want.Materialize(), wantErr)
		}
	}
}

// The codec's wire code names every field of the messages it writes or
// reads, so a field go-control-plane adds is looked at before the codec
// can pass over it.
func TestWireKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		m    proto.Message
		want []protoreflect.FieldNumber
	}{
		{&extprocv3.ProcessingResponse{}, []protoreflect.FieldNumber{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{&extprocv3.HeadersResponse{}, []protoreflect.FieldNumber{1}},
		{&extprocv3.BodyResponse{}, []protoreflect.FieldNumber{1}},
		{&extprocv3.CommonResponse{}, []protoreflect.FieldNumber{1, 2, 3, 4, 5}},
		{&extprocv3.HeaderMutation{}, []protoreflect.FieldNumber{1, 2}},
		{&corev3.HeaderValueOption{}, []protoreflect.FieldNumber{1, 2, 3, 4}},
		{&corev3.HeaderValue{}, []protoreflect.FieldNumber{1, 2, 3}},
		{&extprocv3.BodyMutation{}, []protoreflect.FieldNumber{1, 2, 3}},
		{&filterv3.ProcessingMode{}, []protoreflect.FieldNumber{1, 2, 3, 4, 5, 6}},
		{&structpb.Struct{}, []protoreflect.FieldNumber{1}},
		{&structpb.Value{}, []protoreflect.FieldNumber{1, 2, 3, 4, 5, 6}},
		{&structpb.ListValue{}, []protoreflect.FieldNumber{1}},
		{&extprocv3.ProcessingRequest{}, []protoreflect.FieldNumber{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		{&extprocv3.HttpHeaders{}, []protoreflect.FieldNumber{1, 2, 3}},
		{&corev3.HeaderMap{}, []protoreflect.FieldNumber{1}},
		{&extprocv3.HttpBody{}, []protoreflect.FieldNumber{1, 2, 3, 4, 5}},
		{&extprocv3.ProtocolConfiguration{}, []protoreflect.FieldNumber{1, 2, 3}},
		{&corev3.Metadata{}, []protoreflect.FieldNumber{1, 2}},
	} {
		var got []protoreflect.FieldNumber
		fields := tc.m.ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			got = append(got, fields.Get(i).Number())
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s has fields %v, the wire code knows %v", tc.m.ProtoReflect().Descriptor().FullName(), got, tc.want)
		}
	}
}

// envoyMessages are the messages Envoy sends on a chat exchange.
func envoyMessages() []*extprocv3.ProcessingRequest {
	var hs []*corev3.HeaderValue
	for _, kv := range [][2]string{{":authority", "gateway"}, {":path", "/v1/chat/completions"}, {":method", "POST"}, {"authorization", "Bearer sk-mg-x"}, {"content-type", "application/json"}, {"x-emoji", "🙂"}, {"empty", ""}} {
		hs = append(hs, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
	}
	md := &corev3.Metadata{}
	return []*extprocv3.ProcessingRequest{
		{MetadataContext: md, ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_BUFFERED, SendBodyWithoutWaitingForHeaderResponse: true},
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(`{"model":"gpt-4o"}`), EndOfStream: true}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs[:2]}, EndOfStream: true}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte("data: x\n\n")}}},
		{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{EndOfStream: true, EndOfStreamWithoutMessage: true, GrpcMessageCompressed: true, DrainComplete: true}}},
		{ObservabilityMode: true, Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{}, {Key: "k", Value: "v"}}}}}},
	}
}

// Envoy's messages are read as protobuf reads them, without it.
func TestRequestWireIsProtobufs(t *testing.T) {
	for i, m := range envoyMessages() {
		data := deterministic(t, m)
		var got extprocv3.ProcessingRequest
		if !unmarshalRequest(slices.Clone(data), &got) {
			t.Errorf("message %d: declined", i)
			continue
		}
		if !proto.Equal(&got, m) {
			t.Errorf("message %d: read as %v, want %v", i, &got, m)
		}
	}
}

// scribblePool is a buffer pool that spoils what it is given back, as
// the next use of a pooled buffer would.
type scribblePool struct{}

func (scribblePool) Get(n int) *[]byte { b := make([]byte, n, max(n, 4096)); return &b }
func (scribblePool) Put(b *[]byte) {
	for i := range *b {
		(*b)[i] = 'X'
	}
}

// A decoded message keeps its bytes past gRPC's Free: a pooled buffer's
// are copied, and a plain slice's, which no pool takes back, are used as
// they are.
func TestCodecKeepsWhatGRPCFrees(t *testing.T) {
	c := Codec()
	for i, m := range envoyMessages()[:4] {
		data := deterministic(t, m)
		pooled := scribblePool{}.Get(len(data))
		copy(*pooled, data)
		buf := mem.NewBuffer(pooled, scribblePool{})
		if _, plain := buf.(mem.SliceBuffer); plain {
			t.Fatal("mem.NewBuffer of a pool's buffer made a SliceBuffer")
		}
		var got extprocv3.ProcessingRequest
		if err := c.Unmarshal(mem.BufferSlice{buf}, &got); err != nil {
			t.Fatal(err)
		}
		buf.Free()
		if !proto.Equal(&got, m) {
			t.Errorf("message %d from a pooled buffer, after Free: %v, want %v", i, &got, m)
		}

		plain := slices.Clone(data)
		var kept extprocv3.ProcessingRequest
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(plain)}, &kept); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&kept, m) {
			t.Errorf("message %d from a slice: %v, want %v", i, &kept, m)
		}
		if hs := kept.GetRequestHeaders().GetHeaders().GetHeaders(); len(hs) > 0 {
			if p := unsafe.StringData(hs[0].Key); uintptr(unsafe.Pointer(p)) < uintptr(unsafe.Pointer(&plain[0])) ||
				uintptr(unsafe.Pointer(p)) >= uintptr(unsafe.Pointer(&plain[0]))+uintptr(len(plain)) {
				t.Errorf("message %d: a header of a plain slice was copied", i)
			}
		}
	}
	// A small reply is one buffer, as protobuf writes it.
	r := bodyReply([]byte(`{"id":"x"}`), testMutation())
	out, err := c.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := deterministic(t, r); len(out) != 1 || !bytes.Equal(out.Materialize(), want) {
		t.Errorf("small reply: %d buffers %q, want one %q", len(out), out.Materialize(), want)
	}
	out.Free()
}

// What only protobuf reads is declined, and the codec then reads or
// refuses it as protobuf does.
func TestRequestWireDeclines(t *testing.T) {
	valid := deterministic(t, envoyMessages()[0])
	messages := map[string][]byte{
		"attributes": deterministic(t, &extprocv3.ProcessingRequest{Attributes: map[string]*structpb.Struct{"a": {}}}),
		"metadata":   deterministic(t, &extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"ns": {}}}}),
		"trailers":   deterministic(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{}}}),
		"header attributes": deterministic(t, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			//lint:ignore SA1019 a deprecated field Envoy may still send
			Attributes: map[string]*structpb.Struct{"a": {}}}}}),
		"flow control":  deterministic(t, &extprocv3.ProcessingRequest{FlowControlInit: &extprocv3.ProcessingRequest_FlowControlInit{InitialWindowDownstreamToSidestream: 1}}),
		"two requests":  append(slices.Clone(valid), deterministic(t, envoyMessages()[1])...),
		"unknown field": protowireAppend(valid, 99),
		"truncated":     valid[:len(valid)-1],
		// request_headers{headers{headers{key: "\xff"}}}
		"invalid utf-8":  {0x12, 0x07, 0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0xff},
		"group wiretype": {0x13, 0x14},
	}
	for name, data := range messages {
		var r extprocv3.ProcessingRequest
		if unmarshalRequest(slices.Clone(data), &r) {
			t.Errorf("%s: not declined", name)
		}
		var got, want extprocv3.ProcessingRequest
		gotErr := Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &got)
		wantErr := proto.Unmarshal(data, &want)
		if (gotErr == nil) != (wantErr == nil) || !proto.Equal(&got, &want) {
			t.Errorf("%s: codec read %v (%v), protobuf %v (%v)", name, &got, gotErr, &want, wantErr)
		}
	}
}

// protowireAppend appends an unknown varint field num to a copy of b.
func protowireAppend(b []byte, num int) []byte {
	return append(slices.Clone(b), byte(num<<3), 0x01) // fits one byte for num < 16
}

// A message the wire code reads is read as protobuf reads it.
func FuzzUnmarshalRequest(f *testing.F) {
	for _, m := range envoyMessages() {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got extprocv3.ProcessingRequest
		if !unmarshalRequest(slices.Clone(data), &got) {
			return
		}
		var want extprocv3.ProcessingRequest
		if err := proto.Unmarshal(data, &want); err != nil {
			t.Fatalf("read %x, which protobuf refuses: %v", data, err)
		}
		if !proto.Equal(&got, &want) {
			t.Fatalf("read %x as %v, protobuf as %v", data, &got, &want)
		}
	})
}

// A reply the wire code writes is written as protobuf writes it. The
// replies are whatever protobuf reads from the fuzzer's bytes.
func FuzzMarshalReply(f *testing.F) {
	seeds := []*extprocv3.ProcessingResponse{
		chunkReply([]byte("data: x\n\n")),
		bodyReply([]byte(`{"a":1}`), testMutation()),
		{ModeOverride: streamedOverride(), DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewNumberValue(1), "b": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewBoolValue(true)}})}}},
	}
	for _, m := range seeds {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r extprocv3.ProcessingResponse
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		dropUnknown(r.ProtoReflect())
		got, ok := wireReply(t, &r)
		if !ok {
			return
		}
		if err := protobufWrites(got, &r); err != nil {
			t.Fatalf("%v: %v", &r, err)
		}
	})
}

// dropUnknown clears the unknown fields of m and every message in it:
// this server's replies have none.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool { dropUnknown(v.Message()); return true })
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message())
			}
		case !fd.IsMap() && !fd.IsList() && fd.Message() != nil:
			dropUnknown(v.Message())
		}
		return true
	})
}

func BenchmarkCodec(b *testing.B) {
	final := bodyReply(bytes.Repeat([]byte("y"), 730), testMutation())
	// the shape of exchange.metadata
	final.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"io.modelgate": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"model": structpb.NewStringValue("gpt-4o"), "backend": structpb.NewStringValue("openai"), "provider": structpb.NewStringValue("openai"),
		"account_id": structpb.NewStringValue("acct_01"), "prompt_tokens": structpb.NewNumberValue(12), "completion_tokens": structpb.NewNumberValue(34),
		"total_tokens": structpb.NewNumberValue(46),
	}})}}
	replies := map[string]*extprocv3.ProcessingResponse{
		"chunk": chunkReply(bytes.Repeat([]byte("y"), 300)),
		"final": final,
	}
	requests := map[string][]byte{}
	for i, m := range envoyMessages()[:2] {
		requests[fmt.Sprint("request-", i)], _ = proto.Marshal(m)
	}
	for _, c := range []struct {
		name  string
		codec encoding.CodecV2
	}{{"wire", Codec()}, {"grpc-proto", encoding.GetCodecV2(grpcproto.Name)}} {
		for name, r := range replies {
			b.Run(c.name+"/marshal-"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					out, err := c.codec.Marshal(r)
					if err != nil {
						b.Fatal(err)
					}
					out.Free()
				}
			})
		}
		for name, data := range requests {
			b.Run(c.name+"/unmarshal-"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var r extprocv3.ProcessingRequest
					if err := c.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
