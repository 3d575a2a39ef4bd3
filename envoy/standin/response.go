package standin

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// respond runs the response path for an upstream response or one of the
// stand-in's own local replies (which go through ext_proc, as in Envoy
// 1.37 and later).
func (x *exchange) respond(status int, h headerMap, body io.Reader) {
	h = append(headerMap{{":status", strconv.Itoa(status)}}, h...)
	eos := h.getOr("content-length", "") == "0"
	reader := startReader(body, x.onFinish)
	if x.sending(x.mode.GetResponseHeaderMode()) {
		var err error
		if h, err = x.processResponseHeaders(h, eos); err != nil {
			x.stop(err)
			return
		}
	}
	status, _ = strconv.Atoi(h.getOr(":status", "500"))
	switch {
	case eos:
		x.write(status, h, nil, "")
	case x.active.Load() && x.mode.GetResponseBodyMode() == filterv3.ProcessingMode_BUFFERED:
		x.bufferedResponse(status, h, reader)
	case x.active.Load() && x.mode.GetResponseBodyMode() == filterv3.ProcessingMode_STREAMED:
		x.streamedResponse(status, h.del("content-length"), reader)
	default:
		x.passThrough(status, h, reader)
	}
}

func (h headerMap) getOr(key, def string) string {
	if v, ok := h.get(key); ok {
		return v
	}
	return def
}

func (x *exchange) processResponseHeaders(h headerMap, eos bool) (headerMap, error) {
	resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: h.proto(), EndOfStream: eos}}})
	if err != nil || resp == nil {
		return h, err
	}
	rh, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseHeaders)
	if !ok {
		_, err := x.failed(errSpurious)
		return h, err
	}
	x.override(resp)
	streamed := x.active.Load() && x.mode.GetResponseBodyMode() == filterv3.ProcessingMode_STREAMED
	return (mutation{response: true, stripContentLength: streamed}).apply(h, rh.ResponseHeaders.GetResponse().GetHeaderMutation())
}

func (x *exchange) bufferedResponse(status int, h headerMap, r *bodyReader) {
	body, err := r.readAll(x.p.plan.bufferLimit)
	if errors.Is(err, errTooLarge) {
		x.write(http.StatusInternalServerError, nil, nil, "response_payload_too_large")
		return
	}
	if err != nil {
		x.stop(errAbort)
		return
	}
	resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}})
	if err == nil && resp != nil {
		h, body, err = x.applyBufferedReply(resp, h, body)
	}
	if err != nil {
		x.stop(err)
		return
	}
	status, _ = strconv.Atoi(h.getOr(":status", strconv.Itoa(status)))
	x.write(status, h, body, "")
}

func (x *exchange) applyBufferedReply(resp *extprocv3.ProcessingResponse, h headerMap, body []byte) (headerMap, []byte, error) {
	rb, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseBody)
	if !ok || rb.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse() != nil {
		_, err := x.failed(errSpurious)
		return h, body, err
	}
	common := rb.ResponseBody.GetResponse()
	h, err := (mutation{response: true}).apply(h, common.GetHeaderMutation())
	if err != nil {
		return h, body, err
	}
	if common.GetBodyMutation() != nil {
		body = mutatedBody(body, common.GetBodyMutation())
		err = checkContentLength(h, body)
	}
	return h, body, err
}

func (x *exchange) passThrough(status int, h headerMap, r *bodyReader) {
	x.writeHeaders(status, h)
	for c := range r.chunks {
		if c.err != nil {
			x.stop(errAbort)
			return
		}
		x.w.Write(c.data) //nolint:errcheck // the client went away
		flush(x.w)
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
