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
// 1.37 and later). eos means there is no body.
func (x *exchange) respond(status int, h headerMap, body io.Reader, eos bool) error {
	if err := x.intr.take(); err != nil {
		return err
	}
	x.respStarted = true
	x.timers.disarmRequest() // the filter manager's encodeHeaders disarms request_timeout
	x.timers.touch()
	h = append(headerMap{{":status", strconv.Itoa(status)}}, h...)
	var reader *bodyReader
	if !eos {
		reader = startReader(body, x.onFinish)
	}
	// Envoy's encodeHeaders removes content-length right after sending the
	// headers, with the modes in force then: a mode_override in the reply
	// to a BUFFERED response's headers keeps it.
	strip := x.active.Load() && stripsContentLength(x.mode.GetResponseBodyMode(), x.mode.GetResponseHeaderMode())
	if x.sending(x.mode.GetResponseHeaderMode()) {
		var err error
		if h, err = x.processResponseHeaders(h, eos, strip); err != nil {
			return err
		}
	} else if strip {
		h = h.del("content-length")
	}
	status, _ = strconv.Atoi(h.getOr(":status", "500"))
	if eos {
		x.writeResponse(status, h, nil)
		return nil
	}
	if !x.active.Load() {
		return x.passThrough(status, h, reader)
	}
	switch mode := x.mode.GetResponseBodyMode(); mode {
	case filterv3.ProcessingMode_BUFFERED:
		return x.bufferedResponse(status, h, reader)
	case filterv3.ProcessingMode_STREAMED:
		return x.streamedResponse(status, h, reader)
	case filterv3.ProcessingMode_NONE:
		return x.passThrough(status, h, reader)
	default:
		return x.unimplemented("response_body_mode_" + mode.String())
	}
}

func (h headerMap) getOr(key, def string) string {
	if v, ok := h.get(key); ok {
		return v
	}
	return def
}

func (x *exchange) processResponseHeaders(h headerMap, eos, strip bool) (headerMap, error) {
	resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: h.proto(), EndOfStream: eos}}})
	if strip {
		h = h.del("content-length")
	}
	if err != nil || resp == nil {
		return h, err
	}
	rh, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseHeaders)
	if !ok {
		_, err := x.failed(errSpurious)
		return h, err
	}
	if err := x.override(resp, false); err != nil {
		return h, err
	}
	// The reply's own content-length is skipped under the modes after the
	// override (processor_state.cc, handleHeadersResponse).
	m := mutation{response: true, stripContentLength: stripsContentLength(x.mode.GetResponseBodyMode(), x.mode.GetResponseHeaderMode())}
	h, err = m.apply(h, rh.ResponseHeaders.GetResponse().GetHeaderMutation())
	if err == nil && (eos || x.mode.GetResponseBodyMode() == filterv3.ProcessingMode_NONE) {
		x.closeProc()
	}
	return h, err
}

func (x *exchange) bufferedResponse(status int, h headerMap, r *bodyReader) error {
	held := x.mode.GetResponseHeaderMode() != filterv3.ProcessingMode_SKIP
	if !held { // with headers SKIP, BUFFERED holds only the body
		x.writeHeaders(status, h)
		flush(x.w)
	}
	body, err := r.readAll(x.p.plan.bufferLimit)
	if errors.Is(err, errTooLarge) { // filter_manager.cc, responseDataTooLarge
		return &localReply{status: http.StatusInternalServerError, body: "Internal Server Error", details: "response_payload_too_large"}
	}
	if err != nil {
		return x.bodyError()
	}
	resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}})
	if err == nil && resp != nil {
		h, body, err = x.applyBufferedReply(resp, h, body)
	}
	if err != nil {
		return err
	}
	if !held {
		x.writeBody(body)
		x.endBody()
		return nil
	}
	status, _ = strconv.Atoi(h.getOr(":status", strconv.Itoa(status)))
	x.writeResponse(status, h, body)
	return nil
}

func (x *exchange) applyBufferedReply(resp *extprocv3.ProcessingResponse, h headerMap, body []byte) (headerMap, []byte, error) {
	rb, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseBody)
	if !ok || rb.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse() != nil {
		_, err := x.failed(errSpurious)
		return h, body, err
	}
	common := rb.ResponseBody.GetResponse()
	if x.mode.GetResponseHeaderMode() == filterv3.ProcessingMode_SKIP { // the headers went on: header_mutation is ignored
		if common.GetBodyMutation() != nil {
			body = mutatedBody(body, common.GetBodyMutation())
		}
		return h, body, nil
	}
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

func (x *exchange) passThrough(status int, h headerMap, r *bodyReader) error {
	x.writeHeaders(status, h)
	flush(x.w)
	for c := range r.chunks {
		if c.err != nil {
			return x.bodyError()
		}
		x.writeBody(c.data)
		flush(x.w)
	}
	x.endBody()
	return nil
}

// bodyError is the upstream body failing: an interrupt that cut it, the
// client going away, or the upstream resetting after its headers (Envoy's
// HTTP/1 codec reports a connection closed mid-body as a protocol error).
func (x *exchange) bodyError() error {
	if c := x.intr.take(); c != nil {
		return c
	}
	if x.ctx.Err() != nil {
		return errAbort
	}
	return &localReply{status: http.StatusBadGateway,
		body:    "upstream connect error or disconnect/reset before headers. reset reason: protocol error",
		details: "upstream_reset_after_response_started{protocol_error}", flags: []string{"UPE"}}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
