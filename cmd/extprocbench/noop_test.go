package main

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// The floor's pre-encoded replies are what protobuf writes for the
// smallest legal reply to each message, and it picks each message's from
// the messages as Envoy sends them.
func TestFloorReplies(t *testing.T) {
	headers := func(hs ...header) *extprocv3.HttpHeaders {
		return &extprocv3.HttpHeaders{Headers: headerMap(hs)}
	}
	body := &extprocv3.HttpBody{Body: []byte("{}"), EndOfStream: true}
	for _, c := range []struct {
		name string
		req  *extprocv3.ProcessingRequest
		want *extprocv3.ProcessingResponse
	}{
		{"request headers", &extprocv3.ProcessingRequest{ProtocolConfig: protocolConfig, MetadataContext: metadataContext,
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: headers(requestHeaders("sk", 2, "r")...)}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}},
		{"request body", &extprocv3.ProcessingRequest{MetadataContext: metadataContext,
			Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: body}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}},
		{"JSON response headers", &extprocv3.ProcessingRequest{MetadataContext: metadataContext,
			Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: headers(responseHeaders("application/json", 2)...)}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}},
		{"event stream response headers", &extprocv3.ProcessingRequest{MetadataContext: metadataContext,
			Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: headers(responseHeaders("Text/Event-Stream; charset=utf-8", -1)...)}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}},
				ModeOverride: streamedMode}},
		{"event stream in value", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{
				Headers: []*corev3.HeaderValue{{Key: "content-type", Value: "text/event-stream"}}}}}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}},
				ModeOverride: streamedMode}},
		{"response body", &extprocv3.ProcessingRequest{MetadataContext: metadataContext,
			Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: body}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}},
		{"request trailers", &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{}}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}},
		{"response trailers", &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: &extprocv3.HttpTrailers{}}},
			&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}},
		{"nothing", &extprocv3.ProcessingRequest{MetadataContext: metadataContext}, &extprocv3.ProcessingResponse{}},
	} {
		b, err := proto.Marshal(c.req)
		if err != nil {
			t.Fatal(err)
		}
		var m message
		if err := m.read(b); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := new(extprocv3.ProcessingResponse)
		if err := proto.Unmarshal(replyBytes[m.reply], got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d := cmp.Diff(c.want, got, protocmp.Transform()); d != "" {
			t.Errorf("%s: reply (-want +got):\n%s", c.name, d)
		}
		if want := proto.Size(c.want); want != len(replyBytes[m.reply]) {
			t.Errorf("%s: reply of %d bytes, protobuf writes %d", c.name, len(replyBytes[m.reply]), want)
		}
	}
	var m message
	if err := m.read([]byte{0x12, 0x05, 0x0a}); err == nil {
		t.Error("a truncated message was read")
	}
}
