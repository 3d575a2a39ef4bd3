package main

import (
	"context"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// scenario is one kind of exchange: the request and answer Envoy passes
// through the ext_proc server.
type scenario struct {
	name        string
	request     []byte
	contentType string   // of the answer
	answer      [][]byte // the answer's body as Envoy receives it
	streamed    bool     // the server is expected to switch the answer to STREAMED
}

func scenarios() []scenario {
	return []scenario{
		{name: "json", request: []byte(chatRequest), contentType: "application/json",
			answer: [][]byte{[]byte(chatResponse)}},
		{name: "stream", request: []byte(streamRequest), contentType: "text/event-stream",
			answer: cut(streamBody(), streamPieces, 1), streamed: true},
	}
}

// driver plays Envoy's side of the ext_proc protocol for one filter
// configured as the gateway's bootstrap configures it: request headers
// SEND, request body BUFFERED, response headers SEND, response body
// BUFFERED unless the response-headers reply overrides it, trailers SKIP.
type driver struct {
	// clients are one for each of Envoy's workers; a worker's exchanges
	// all go through its own.
	clients []extprocv3.ExternalProcessorClient
	key     string
	// translates: the server must replace the request body (modelgate);
	// a no-op server must not.
	translates bool
}

// metadataContext is what Envoy puts in every message when no namespace
// is forwarded (ext_proc.cc: setDynamicMetadata on every message; an
// empty Metadata without forwarding_namespaces).
var metadataContext = &corev3.Metadata{}

var protocolConfig = &extprocv3.ProtocolConfiguration{
	RequestBodyMode:  filterv3.ProcessingMode_BUFFERED,
	ResponseBodyMode: filterv3.ProcessingMode_BUFFERED,
}

func headerMap(hs []header) *corev3.HeaderMap {
	m := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, len(hs))}
	for i, h := range hs {
		m.Headers[i] = &corev3.HeaderValue{Key: h.name, RawValue: []byte(h.value)}
	}
	return m
}

// exchange plays one HTTP request through the server on worker's
// connection and checks each reply is the one Envoy needs to go on.
func (d *driver) exchange(ctx context.Context, sc *scenario, worker int, requestID string) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	// Envoy half-closes and resets the stream after the last reply.
	defer cancel()
	s, err := d.clients[worker%len(d.clients)].Process(ctx)
	if err != nil {
		return err
	}
	call := func(r *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if err := s.Send(r); err != nil {
			return nil, err
		}
		return s.Recv()
	}
	resp, err := call(&extprocv3.ProcessingRequest{ProtocolConfig: protocolConfig, MetadataContext: metadataContext,
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: headerMap(requestHeaders(d.key, len(sc.request), requestID))}}})
	if err != nil {
		return err
	}
	if resp.GetRequestHeaders() == nil {
		return fmt.Errorf("request headers: got %s", describe(resp))
	}
	resp, err = call(&extprocv3.ProcessingRequest{MetadataContext: metadataContext, Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: sc.request, EndOfStream: true}}})
	if err != nil {
		return err
	}
	if rb := resp.GetRequestBody(); rb == nil || (rb.GetResponse().GetBodyMutation().GetBody() != nil) != d.translates {
		return fmt.Errorf("request body: got %s", describe(resp))
	}
	bodyLen := -1
	if !sc.streamed {
		bodyLen = len(sc.answer[0])
	}
	resp, err = call(&extprocv3.ProcessingRequest{MetadataContext: metadataContext, Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(responseHeaders(sc.contentType, bodyLen))}}})
	if err != nil {
		return err
	}
	if resp.GetResponseHeaders() == nil {
		return fmt.Errorf("response headers: got %s", describe(resp))
	}
	streamed := resp.GetModeOverride().GetResponseBodyMode() == filterv3.ProcessingMode_STREAMED
	if streamed != sc.streamed {
		return fmt.Errorf("response headers: streamed %v, want %v", streamed, sc.streamed)
	}
	// In STREAMED mode Envoy sends each chunk as it arrives, without
	// waiting for the replies to earlier ones.
	sent := make(chan error, 1)
	go func() {
		for i, piece := range sc.answer {
			if err := s.Send(&extprocv3.ProcessingRequest{MetadataContext: metadataContext, Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{Body: piece, EndOfStream: i == len(sc.answer)-1}}}); err != nil {
				sent <- err
				return
			}
		}
		sent <- s.CloseSend()
	}()
	for range sc.answer {
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		if resp.GetResponseBody() == nil {
			return fmt.Errorf("response body: got %s", describe(resp))
		}
	}
	return <-sent
}

func describe(resp *extprocv3.ProcessingResponse) string {
	if ir := resp.GetImmediateResponse(); ir != nil {
		return fmt.Sprintf("immediate response %d %q", ir.GetStatus().GetCode(), ir.GetBody())
	}
	return fmt.Sprintf("%T", resp.GetResponse())
}
