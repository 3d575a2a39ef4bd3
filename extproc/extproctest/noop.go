package extproctest

import (
	"errors"
	"io"
	"mime"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Noop is the floor the gateway's cost is measured against: an ext_proc
// server that does nothing but answer CONTINUE to every message and
// switch event streams to STREAMED, so that it costs Envoy the same round
// trips as the gateway does.
type Noop struct {
	extprocv3.UnimplementedExternalProcessorServer
}

var streamedMode = &filterv3.ProcessingMode{
	RequestBodyMode:  filterv3.ProcessingMode_BUFFERED,
	ResponseBodyMode: filterv3.ProcessingMode_STREAMED,
}

// Process implements extprocv3.ExternalProcessorServer.
func (Noop) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		resp := &extprocv3.ProcessingResponse{}
		switch r := req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp.Response = &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}
		case *extprocv3.ProcessingRequest_RequestBody:
			resp.Response = &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp.Response = &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}
			for _, h := range r.ResponseHeaders.GetHeaders().GetHeaders() {
				if h.GetKey() == "content-type" {
					if mt, _, _ := mime.ParseMediaType(string(h.GetRawValue())); mt == "text/event-stream" {
						resp.ModeOverride = streamedMode
					}
				}
			}
		case *extprocv3.ProcessingRequest_ResponseBody:
			resp.Response = &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}
		case *extprocv3.ProcessingRequest_RequestTrailers:
			resp.Response = &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			resp.Response = &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}
		}
		if err := s.Send(resp); err != nil {
			return nil
		}
	}
}
