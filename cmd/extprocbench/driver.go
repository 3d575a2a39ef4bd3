package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

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
	// unique: each exchange's request text differs (the order number in
	// it is the request's id), so that no verdict the gateway keeps of a
	// text answers for the next exchange's.
	unique bool
}

// scenarios are json and stream, for model gpt-4o, which no guardrail
// reads, and as rules read them (benchConfig): +regex for gpt-4o-regex, a
// regular expression on the request's text and one on the answer's,
// +service for gpt-4o-service, the same checked by a guard service that
// answers in 50 ms. No rule matches anything: all pass.
func scenarios() []scenario {
	json := scenario{name: "json", request: []byte(chatRequest), contentType: "application/json",
		answer: [][]byte{[]byte(chatResponse)}}
	stream := scenario{name: "stream", request: []byte(streamRequest), contentType: "text/event-stream",
		answer: cut(streamBody(), streamPieces, 1), streamed: true}
	service := stream.guarded("+service", "gpt-4o-service")
	service.unique = true
	return []scenario{json, stream, json.guarded("+regex", "gpt-4o-regex"), stream.guarded("+regex", "gpt-4o-regex"), service}
}

// guarded is sc for model instead of gpt-4o, its name with suffix.
func (sc scenario) guarded(suffix, model string) scenario {
	sc.name += suffix
	sc.request = bytes.Replace(sc.request, []byte(`"model":"gpt-4o"`), []byte(`"model":"`+model+`"`), 1)
	return sc
}

// body is the request's body in the exchange requestID.
func (sc *scenario) body(requestID string) []byte {
	if !sc.unique {
		return sc.request
	}
	return bytes.Replace(sc.request, []byte(orderNumber), []byte(requestID), 1)
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

// stream is one ext_proc stream, as Envoy's side holds it.
type stream = extprocv3.ExternalProcessor_ProcessClient

// call sends r and receives the reply.
func call(s stream, r *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := s.Send(r); err != nil {
		return nil, err
	}
	return s.Recv()
}

// exchange plays one HTTP request through the server on worker's
// connection and checks each reply is the one Envoy needs to go on. Of a
// streamed answer it returns the time to first text: from sending the
// request headers to the reply that lets the answer's first text through
// to the client.
func (d *driver) exchange(ctx context.Context, sc *scenario, worker int, requestID string) (ttft time.Duration, err error) {
	ctx, cancel := context.WithCancel(ctx)
	// Envoy half-closes and resets the stream after the last reply.
	defer cancel()
	s, err := d.clients[worker%len(d.clients)].Process(ctx)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := d.request(s, sc.body(requestID), requestID); err != nil {
		return 0, err
	}
	bodyLen := -1
	if !sc.streamed {
		bodyLen = len(sc.answer[0])
	}
	resp, err := call(s, &extprocv3.ProcessingRequest{MetadataContext: metadataContext, Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(responseHeaders(sc.contentType, bodyLen))}}})
	if err != nil {
		return 0, err
	}
	if resp.GetResponseHeaders() == nil {
		return 0, fmt.Errorf("response headers: got %s", describe(resp))
	}
	streamed := resp.GetModeOverride().GetResponseBodyMode() == filterv3.ProcessingMode_STREAMED
	if streamed != sc.streamed {
		return 0, fmt.Errorf("response headers: streamed %v, want %v", streamed, sc.streamed)
	}
	return answer(s, sc, start)
}

// request sends the request's headers and body, and checks the replies.
func (d *driver) request(s stream, body []byte, requestID string) error {
	resp, err := call(s, &extprocv3.ProcessingRequest{ProtocolConfig: protocolConfig, MetadataContext: metadataContext,
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: headerMap(requestHeaders(d.key, len(body), requestID))}}})
	if err != nil {
		return err
	}
	if resp.GetRequestHeaders() == nil {
		return fmt.Errorf("request headers: got %s", describe(resp))
	}
	resp, err = call(s, &extprocv3.ProcessingRequest{MetadataContext: metadataContext, Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}})
	if err != nil {
		return err
	}
	if rb := resp.GetRequestBody(); rb == nil || (rb.GetResponse().GetBodyMutation().GetBody() != nil) != d.translates {
		return fmt.Errorf("request body: got %s", describe(resp))
	}
	return nil
}

// answer sends the answer's body and checks each piece gets a reply; of
// a streamed answer it returns the time from start to the reply that lets
// its first text through (and fails when none does).
func answer(s stream, sc *scenario, start time.Time) (ttft time.Duration, err error) {
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
	watch := textWatch{mark: []byte(firstTextMark)}
	for _, piece := range sc.answer {
		resp, err := s.Recv()
		if err != nil {
			return 0, err
		}
		if resp.GetResponseBody() == nil {
			return 0, fmt.Errorf("response body: got %s", describe(resp))
		}
		if sc.streamed && ttft == 0 && watch.seen(passed(resp.GetResponseBody(), piece)) {
			ttft = time.Since(start)
		}
	}
	if sc.streamed && ttft == 0 {
		return 0, errors.New("response body: the answer's text never reached the client")
	}
	return ttft, <-sent
}

// passed is what reply lets through to the client of piece: the body
// that replaces it, or the piece itself when there is none.
func passed(reply *extprocv3.BodyResponse, piece []byte) []byte {
	if m := reply.GetResponse().GetBodyMutation(); m != nil {
		return m.GetBody()
	}
	return piece
}

// textWatch finds mark in bytes that arrive cut anywhere.
type textWatch struct {
	mark []byte
	tail []byte // the last bytes seen, fewer than mark's
}

// seen reports that mark is in what arrived so far, b the latest.
func (w *textWatch) seen(b []byte) bool {
	w.tail = append(w.tail, b...)
	if bytes.Contains(w.tail, w.mark) {
		return true
	}
	if keep := len(w.mark) - 1; len(w.tail) > keep {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-keep:]...)
	}
	return false
}

func describe(resp *extprocv3.ProcessingResponse) string {
	if ir := resp.GetImmediateResponse(); ir != nil {
		return fmt.Sprintf("immediate response %d %q", ir.GetStatus().GetCode(), ir.GetBody())
	}
	return fmt.Sprintf("%T", resp.GetResponse())
}
