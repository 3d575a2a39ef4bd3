package standin

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// localReply is a response Envoy makes itself (sendLocalReply).
type localReply struct {
	status int
	// headers are what the sender adds before local_reply_config runs
	// (sendLocalReply's modify_headers): an immediate response's header
	// mutation, a direct response's response_headers_to_add.
	headers headerMap
	body    string
	details string
	flags   []string // response flags, short names
	// lateFlags are response flags set after local_reply_config ran, so
	// that its filters do not see them.
	lateFlags []string
	// skipFilters sends it without ext_proc: ext_proc's own errors and
	// immediate responses do not go through ext_proc again.
	skipFilters bool
	// codecError marks the HTTP/1 codec's reply to a request it cannot
	// parse, after which the connection closes (codecErrorReply).
	codecError bool
}

func (l *localReply) Error() string { return "local reply " + strconv.Itoa(l.status) + " " + l.details }

// immediate turns an ImmediateResponse into a local reply (ext_proc.cc,
// sendImmediateResponse).
func immediate(ir *extprocv3.ImmediateResponse) *localReply {
	status := int(ir.GetStatus().GetCode())
	if status < 200 {
		status = 200
	}
	h, err := (mutation{}).apply(nil, ir.GetHeaders())
	if err != nil {
		h = nil // errors in immediate-response headers are only logged by Envoy
	}
	return &localReply{status: status, headers: h, body: string(ir.GetBody()), details: detailsOf(ir.GetDetails()), skipFilters: true}
}

// codecErrorReply is the HTTP/1 codec's reply to a request whose framing
// it cannot parse, such as a malformed chunked body (codec_impl.cc,
// dispatchSlice and sendProtocolError: 400, the code's name as body,
// details http1.codec_error). The connection manager then closes the
// connection at once (conn_manager_impl.cc, handleCodecError), resetting
// the stream if a filter still holds the reply; either way the request
// gets the DPE flag (ActiveStream::onResetStream, resetAllStreams).
func codecErrorReply() *localReply {
	return &localReply{status: http.StatusBadRequest, body: "Bad Request", details: "http1.codec_error", lateFlags: []string{"DPE"}, codecError: true}
}

// extProcError is ext_proc failing the request (handleErrorResponse and
// friends): status_on_error, the reason as details, and no more
// processing.
func (x *exchange) extProcError(status int, details string) *localReply {
	x.closeProc()
	return &localReply{status: status, details: detailsOf(details), skipFilters: true}
}

// unimplemented is the stand-in refusing, per request, something the
// server asked for that it does not implement: never silently.
func (x *exchange) unimplemented(what string) *localReply {
	x.closeProc()
	return &localReply{status: http.StatusInternalServerError, details: "standin_unimplemented{" + what + "}", skipFilters: true}
}

// stop ends the request with err (nil: it completed).
func (x *exchange) stop(err error) {
	var lr *localReply
	var me *mutationError
	switch {
	case err == nil:
		return
	case errors.As(err, &me):
		lr = x.extProcError(x.p.plan.extproc.statusOnError, me.details)
	case errors.As(err, &lr):
	case errors.Is(err, errAbort): // the client went away
		if x.entry.Details == "" {
			x.entry.Details = "downstream_remote_disconnect"
		}
		x.reset()
		return
	default: // a stand-in bug: never answer 200 by accident
		lr = &localReply{status: http.StatusInternalServerError, details: "standin_" + detailsOf(err.Error()), skipFilters: true}
	}
	x.sendLocalReply(lr)
}

// sendLocalReply is Envoy's (filter_manager.cc): while no response has
// started, the reply goes through the encoder filters (ext_proc, unless it
// is ext_proc's own); when a filter holds the response headers it goes
// straight to the client; once headers went downstream the stream is
// reset. local_reply_config rewrites it in the first two cases.
func (x *exchange) sendLocalReply(lr *localReply) {
	x.timers.stopRouter() // the router resets the upstream (onLocalReply)
	x.cancelUpstream()
	x.addFlags(lr.flags)
	x.entry.Details = lr.details
	if x.headersSent {
		x.addFlags(lr.lateFlags)
		x.reset()
		return
	}
	x.mdMu.Lock()
	md := x.entry.Metadata // mergeMetadataFrom replaces values, never edits them
	status, h, body := x.p.plan.localReply.prepare(lr, x.flags, md, x.headers)
	x.mdMu.Unlock()
	x.addFlags(lr.lateFlags)
	if x.respStarted || lr.skipFilters || !x.active.Load() || x.p.localRepliesSkipExtProc() {
		x.respStarted = true
		x.writeResponse(status, h, []byte(body))
		return
	}
	if lr.codecError {
		x.codecErrorReset(status, h, body)
		return
	}
	x.stop(x.respond(status, h, newBytesBody([]byte(body)), body == ""))
}

// codecErrorReset sends the codec's reply into ext_proc's response path,
// which holds it for the processor while the connection manager resets
// the stream: the processor gets the message, the client no answer
// (envoyproxy/envoy#29440). Only without a message to send does the reply
// reach the client whole.
func (x *exchange) codecErrorReset(status int, h headerMap, body string) {
	x.respStarted = true
	eos := body == ""
	bodyMode := x.mode.GetResponseBodyMode()
	var msg *extprocv3.ProcessingRequest
	switch {
	case x.sending(x.mode.GetResponseHeaderMode()):
		h = append(headerMap{{":status", strconv.Itoa(status)}}, h...)
		msg = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
			ResponseHeaders: &extprocv3.HttpHeaders{Headers: h.proto(), EndOfStream: eos}}}
	case eos || bodyMode == filterv3.ProcessingMode_NONE:
		x.writeResponse(status, h, []byte(body))
		return
	default: // the headers go on; ext_proc holds the body
		if stripsContentLength(bodyMode, x.mode.GetResponseHeaderMode()) {
			h = h.del("content-length")
		}
		x.writeHeaders(status, h)
		msg = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}}
	}
	x.ps.send(x.ctx, msg) //nolint:errcheck // the stream is reset next, whatever the processor does
	x.closeProc()
	x.reset()
}

// flagOrder is the order of Envoy's CoreResponseFlag enum, which
// %RESPONSE_FLAGS% follows.
var flagOrder = []string{"LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE",
	"DC", "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF", "DO", "DR"}

func (x *exchange) addFlags(flags []string) {
	for _, f := range flags {
		if !slices.Contains(x.flags, f) {
			x.flags = append(x.flags, f)
		}
	}
	slices.SortFunc(x.flags, func(a, b string) int { return slices.Index(flagOrder, a) - slices.Index(flagOrder, b) })
	x.entry.Flags = strings.Join(x.flags, ",")
}

// flagString is %RESPONSE_FLAGS%: "-" when none is set
// (ResponseFlagUtils::toShortString).
func flagString(flags []string) string {
	if len(flags) == 0 {
		return "-"
	}
	return strings.Join(flags, ",")
}

// reset resets the downstream stream: the client sees the connection
// closed, and an HTTP/1 chunked body without its last chunk.
func (x *exchange) reset() {
	if x.headersSent {
		flush(x.w)
	}
	panic(http.ErrAbortHandler)
}

// writeResponse sends a whole response to the client.
func (x *exchange) writeResponse(status int, h headerMap, body []byte) {
	x.writeHeaders(status, h)
	if len(body) > 0 {
		if _, ok := h.get("content-length"); !ok {
			flush(x.w) // Envoy's HTTP/1 codec frames a body without content-length as chunked
		}
		x.writeBody(body)
	}
	x.endBody()
}

func (x *exchange) writeHeaders(status int, h headerMap) {
	out := x.w.Header()
	x.declared = -1
	for _, e := range h {
		if strings.HasPrefix(e.key, ":") || hopByHop[e.key] {
			continue
		}
		if e.key == "content-length" {
			if n, err := strconv.ParseInt(e.value, 10, 64); err == nil && n >= 0 {
				x.declared = n
			}
		}
		out.Add(e.key, e.value)
	}
	// The request's x-request-id as it is now, a filter's change
	// included (conn_manager_utility.cc, mutateResponseHeaders:
	// setInResponse from the request headers).
	if id, _ := x.headers.get("x-request-id"); x.p.plan.alwaysSetRequestID && id != "" {
		out.Set("X-Request-Id", id)
	}
	if !x.bodyComplete() {
		// An answer before the whole request arrived ends the connection,
		// as Envoy's HTTP/1 codec does: the rest of the body is never read,
		// so nothing after it on the connection can be parsed.
		out.Set("Connection", "close")
	}
	x.entry.Status = status
	x.headersSent = true
	x.timers.touch()
	x.w.WriteHeader(status)
}

// writeBody writes body bytes, never past a declared content-length: like
// Envoy, the stand-in forwards the length it was given, and the client
// sees a body that does not match it.
func (x *exchange) writeBody(p []byte) {
	if x.declared >= 0 && x.written+int64(len(p)) > x.declared {
		p = p[:x.declared-x.written]
		x.overflow = true
	}
	if len(p) > 0 {
		x.w.Write(p) //nolint:errcheck // the client went away
		x.written += int64(len(p))
	}
	x.timers.touch()
}

// endBody ends the response. Bytes beyond the declared length would have
// reached the client as garbage on the connection: close it instead. A
// shorter body makes net/http close it.
func (x *exchange) endBody() {
	if x.overflow {
		x.reset()
	}
}
