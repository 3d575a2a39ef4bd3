package standin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// upstreamProc is one attempt's ext_proc filter in the cluster's upstream
// HTTP filter chain (doc.go, "Upstream HTTP filters"; ext_proc.cc run as
// an upstream filter, upstream_request.cc): a fresh filter, hence its own
// stream, per attempt, on the request's one header map and on the
// attempt's own copy of the body. Whatever it answers with an
// immediate_response, and every failure, becomes a local reply of the
// downstream stream that is never retried; its clear_route_cache is
// ignored.
type upstreamProc struct {
	x      *exchange
	fc     *filterConfig
	ps     *procStream
	ctx    context.Context // the attempt's
	abort  context.CancelCauseFunc
	info   *attemptInfo
	active atomic.Bool
	mode   *filterv3.ProcessingMode // the configured modes, this attempt's body mode
	first  bool                     // no message sent yet: attributes go on the next
}

func (x *exchange) newUpstreamProc(c *cluster, ctx context.Context, abort context.CancelCauseFunc, info *attemptInfo) *upstreamProc {
	fc := c.upstream
	u := &upstreamProc{x: x, fc: fc, ctx: ctx, abort: abort, info: info, first: true,
		mode: &filterv3.ProcessingMode{RequestHeaderMode: fc.mode.GetRequestHeaderMode(), RequestBodyMode: fc.mode.GetRequestBodyMode(),
			ResponseHeaderMode: fc.mode.GetResponseHeaderMode()}}
	u.ps = &procStream{conn: x.p.conns[fc.cluster], cluster: x.p.plan.clusters[fc.cluster], fc: fc, mode: fc.mode,
		unsolicited: u.unsolicited, metadata: func() *corev3.Metadata { return x.metadataContext(fc.forward) }}
	u.active.Store(true)
	x.onFinish(u.close)
	return u
}

// close ends processing: half-close and cancel (onDestroy, or nothing
// more to send).
func (u *upstreamProc) close() {
	u.active.Store(false)
	u.ps.close()
}

func (u *upstreamProc) sending(m filterv3.ProcessingMode_HeaderSendMode) bool {
	return u.active.Load() && m != filterv3.ProcessingMode_SKIP
}

// request runs the request path on the shared header map (x.headers) and
// the attempt's body, and returns the body to send.
func (u *upstreamProc) request(body []byte) ([]byte, error) {
	x := u.x
	eos := len(body) == 0
	strip := stripsContentLength(u.mode.GetRequestBodyMode(), u.mode.GetRequestHeaderMode())
	if u.sending(u.mode.GetRequestHeaderMode()) {
		resp, err := u.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
			RequestHeaders: &extprocv3.HttpHeaders{Headers: x.headers.proto(), EndOfStream: eos}}})
		if strip {
			x.headers = x.headers.del("content-length")
		}
		if err != nil {
			return body, err
		}
		if resp != nil {
			hr, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_RequestHeaders)
			if !ok {
				return body, u.failed(errSpurious)
			}
			common := hr.RequestHeaders.GetResponse()
			replace := common.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
			if x.headers, err = (mutation{replace: replace, stripContentLength: strip}).apply(x.headers, common.GetHeaderMutation()); err != nil {
				return body, u.mutationFailed(err)
			}
			if replace && common.GetBodyMutation() != nil {
				body = mutatedBody(nil, common.GetBodyMutation())
				x.headers = x.headers.del("content-length")
				u.mode.RequestBodyMode = filterv3.ProcessingMode_NONE
			}
		}
	} else if strip && u.active.Load() {
		x.headers = x.headers.del("content-length")
	}
	if !eos && u.active.Load() && u.mode.GetRequestBodyMode() == filterv3.ProcessingMode_BUFFERED {
		if int64(len(body)) > x.p.plan.bufferLimit { // requestDataTooLarge, in the upstream chain
			u.close()
			return body, &localReply{status: http.StatusRequestEntityTooLarge, body: "Payload Too Large", details: "request_payload_too_large"}
		}
		resp, err := u.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}})
		if err != nil || resp == nil {
			return body, err
		}
		br, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_RequestBody)
		if !ok || br.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse() != nil {
			return body, u.failed(errSpurious)
		}
		common := br.RequestBody.GetResponse()
		if u.mode.GetRequestHeaderMode() != filterv3.ProcessingMode_SKIP { // the headers are still held
			if x.headers, err = (mutation{}).apply(x.headers, common.GetHeaderMutation()); err != nil {
				return body, u.mutationFailed(err)
			}
		}
		if common.GetBodyMutation() != nil {
			body = mutatedBody(body, common.GetBodyMutation())
			if err := checkContentLength(x.headers, body); err != nil {
				return body, u.mutationFailed(err)
			}
		}
	}
	if !u.sending(u.mode.GetResponseHeaderMode()) {
		u.close() // nothing more will be sent
	}
	return body, nil
}

// responseHeaders runs an attempt's response headers through the filter,
// before the router's retry and outlier decisions.
func (u *upstreamProc) responseHeaders(status int, h headerMap, eos bool) (int, headerMap, error) {
	if !u.sending(u.mode.GetResponseHeaderMode()) {
		return status, h, nil
	}
	full := append(headerMap{{":status", strconv.Itoa(status)}}, h...)
	resp, err := u.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: full.proto(), EndOfStream: eos}}})
	if err != nil || resp == nil {
		return status, h, err
	}
	rh, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseHeaders)
	if !ok {
		return status, h, u.failed(errSpurious)
	}
	full, err = (mutation{response: true}).apply(full, rh.ResponseHeaders.GetResponse().GetHeaderMutation())
	if err != nil {
		return status, h, u.mutationFailed(err)
	}
	u.close() // response body NONE: that was the last message
	status, _ = strconv.Atoi(full.getOr(":status", strconv.Itoa(status)))
	return status, full.del(":status"), nil
}

// call sends a message and awaits its reply. The first message of the
// stream carries the request attributes. A nil reply with a nil error
// means "continue without ext_proc".
func (u *upstreamProc) call(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if u.first {
		u.first = false
		if len(u.fc.attrs) > 0 {
			fields := map[string]*structpb.Value{}
			for _, a := range u.fc.attrs {
				if v, ok := a.eval(u.info); ok {
					fields[a.expr] = v
				}
			}
			req.Attributes = map[string]*structpb.Struct{attributesKey: {Fields: fields}}
		}
	}
	if err := u.ps.send(u.ctx, req); err != nil {
		return nil, u.failed(err)
	}
	resp, err := u.ps.await(u.ctx, u.x.intr.wait())
	switch {
	case errors.Is(err, errInterrupted):
		u.close()
		return nil, u.x.intr.take()
	case err != nil:
		return nil, u.failed(err)
	}
	u.x.mergeMetadataFrom(resp, u.fc.namespaces)
	if ir := resp.GetImmediateResponse(); ir != nil {
		u.close()
		return nil, u.localReply(upstreamImmediate(ir))
	}
	switch resp.GetResponse().(type) {
	case nil:
		return nil, u.failed(errUnhandled)
	case *extprocv3.ProcessingResponse_StreamedImmediateResponse:
		u.close()
		return nil, &localReply{status: http.StatusInternalServerError, details: "standin_unimplemented{streamed_immediate_response}"}
	case *extprocv3.ProcessingResponse_RequestTrailers, *extprocv3.ProcessingResponse_ResponseTrailers:
		return nil, u.failed(errSpurious)
	}
	return resp, nil
}

// upstreamImmediate is an immediate response from an upstream filter: a
// local reply of the downstream stream, which (unlike a router-level
// filter's own) the router-level ext_proc sees.
func upstreamImmediate(ir *extprocv3.ImmediateResponse) *localReply {
	lr := immediate(ir)
	lr.skipFilters = false
	return lr
}

// failed is ext_proc's error handling in the upstream chain: a clean close
// continues without it; the attempt being reset passes through (its cause
// decides); otherwise failure_mode_allow continues, and anything else is a
// local reply (504 for a message timeout, status_on_error otherwise).
func (u *upstreamProc) failed(err error) error {
	u.close()
	var ge *grpcError
	switch {
	case errors.Is(err, errClosed):
		return nil
	case u.ctx.Err() != nil, errors.Is(err, context.Canceled):
		return errAttemptEnded
	case u.fc.failureModeAllow:
		return nil
	case errors.Is(err, errTimeout):
		return u.localReply(&localReply{status: http.StatusGatewayTimeout, details: detailsOf(errTimeout.Error())})
	case errors.As(err, &ge):
		return u.localReply(&localReply{status: u.fc.statusOnError, details: detailsOf(ge.Error())})
	}
	return u.localReply(&localReply{status: u.fc.statusOnError, details: detailsOf(err.Error())})
}

// localReply is the filter's sendImmediateResponse: a local reply of the
// downstream stream, or, on releases that ignore it in an upstream chain,
// nothing at all. The attempt then stays paused until its per-try timeout
// resets it (and the router may retry) or a timer of the route or the
// connection manager ends the request.
func (u *upstreamProc) localReply(lr *localReply) error {
	if !u.x.p.upstreamRepliesIgnored() {
		return lr
	}
	select {
	case <-u.ctx.Done():
	case <-u.x.intr.wait():
	}
	return errAttemptEnded
}

// mutationFailed: a rejected mutation fails with status_on_error.
func (u *upstreamProc) mutationFailed(err error) error {
	u.close()
	var me *mutationError
	if errors.As(err, &me) {
		return u.localReply(&localReply{status: u.fc.statusOnError, details: detailsOf(me.details)})
	}
	return err
}

// errAttemptEnded: the attempt was reset while the filter waited; the
// attempt's cancel cause says why.
var errAttemptEnded = errors.New("attempt ended")

// unsolicited handles what the processor sends while nothing is pending:
// an immediate response, an error or a spurious reply ends the attempt
// with a local reply (unless failure_mode_allow), a clean close ends
// processing.
func (u *upstreamProc) unsolicited(resp *extprocv3.ProcessingResponse, err error) {
	if !u.active.Load() {
		return
	}
	fc := u.fc
	var cause *localReply
	switch {
	case errors.Is(err, errClosed):
	case err != nil:
		if !fc.failureModeAllow {
			cause = &localReply{status: fc.statusOnError, details: detailsOf(err.Error())}
		}
	case resp.GetImmediateResponse() != nil:
		u.x.mergeMetadataFrom(resp, fc.namespaces)
		cause = upstreamImmediate(resp.GetImmediateResponse())
	case !fc.failureModeAllow:
		cause = &localReply{status: fc.statusOnError, details: detailsOf(errSpurious.Error())}
	}
	u.close()
	if cause != nil && !u.x.p.upstreamRepliesIgnored() {
		u.abort(cause)
	}
}
