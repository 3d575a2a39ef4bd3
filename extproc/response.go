package extproc

import (
	"context"
	"errors"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"

	"modelgate/translate/openai"
)

// responseHeaders lets the translator decide the client-facing head and
// switches successful streams to STREAMED.
func (ex *exchange) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	hm := readHeaders(h.GetHeaders())
	ex.status, _ = strconv.Atoi(hm[":status"])
	resp := &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}
	out := &extprocv3.ProcessingResponse{Response: resp}
	if ex.tr == nil { // a local reply of Envoy's for a request we never routed
		ex.phase = phaseDone
		return out
	}
	ex.head = ex.tr.ResponseHeaders(ex.status, hm["content-type"])
	var mut headers
	mut.Set("content-type", ex.head.ContentType)
	rateHeaders(ex.limit, &mut)
	if ex.head.Status != ex.status {
		mut.Set(":status", strconv.Itoa(ex.head.Status))
	}
	if ex.head.Stream {
		mut.Remove("content-length")
		out.ModeOverride = streamedOverride()
	}
	resp.ResponseHeaders.Response = &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}
	ex.phase = phaseResponseBody
	if h.GetEndOfStream() {
		ex.phase = phaseDone
	}
	return out
}

// responseBody translates the buffered body or one streamed chunk.
func (ex *exchange) responseBody(ctx context.Context, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if ex.tr == nil {
		return bodyReply(nil, false, nil)
	}
	// In BUFFERED mode Envoy sends exactly one message; its end_of_stream
	// is false only when trailers follow, which we do not process.
	eos := b.GetEndOfStream() || !ex.head.Stream
	out, err := ex.tr.ResponseBody(b.GetBody(), eos)
	if err == nil && ex.imgReq != nil {
		out, err = ex.imageURLs(ctx, out)
	}
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &reqErr) && !ex.head.Stream:
		// The provider answered 200 with nothing the client can use, for
		// a reason that is the request's (an image every result of which
		// a safety filter removed): the client's error, not ours.
		return ex.fail(err)
	case err != nil:
		ex.log.Error("translating response", zap.Error(err))
		return ex.fail(errInternal(err))
	}
	if len(out) > 0 && ex.firstByte.IsZero() {
		ex.firstByte = ex.s.now()
	}
	if ex.responses != nil && !ex.saved {
		ex.saveResponse(ctx)
	}
	var mut *headers
	if !ex.head.Stream {
		mut = &headers{}
		mut.Set("content-length", strconv.Itoa(len(out)))
	}
	reply := bodyReply(out, true, mut)
	if eos {
		ex.phase = phaseDone
		reply.DynamicMetadata = ex.metadata()
	}
	return reply
}

// bodyReply answers a body message. Without replace the chunk goes on
// unchanged; with it, body replaces the chunk even when empty.
func bodyReply(body []byte, replace bool, mut *headers) *extprocv3.ProcessingResponse {
	common := &extprocv3.CommonResponse{}
	if replace {
		common.BodyMutation = bodyMutation(body)
	}
	if mut != nil {
		common.HeaderMutation = mut.mutation()
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: common},
	}}
}
