package extproc

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"

	"modelgate/envoy/routing"
)

// recoverFinish keeps a panic in end-of-exchange bookkeeping from taking
// the process down.
func recoverFinish(s *Server, log *exchangeLog) {
	if r := recover(); r != nil {
		s.cfg.Metrics.panicked()
		log.Error("panic while finishing an exchange", zap.Any("panic", r), zap.Stack("stack"))
	}
}

// envoyError is what the client is told of one of Envoy's own replies
// (a timeout, a connect failure, a body over its buffer), by its
// %RESPONSE_CODE_DETAILS%, naming the model and never the provider's URL.
// sent reports whether the provider may have received request r, routed
// on rt (and translated when routed).
func envoyError(r *request, rt *route, routed bool, status int, details string) (apiErr *APIError, sent bool) {
	model := "the model" // lower case: capital() starts a sentence with it
	if r.model != "" {
		model += " `" + quoted(r.model) + "`"
	}
	timeout := func(msg string) *APIError {
		return &APIError{Status: http.StatusGatewayTimeout, Type: typeServer, Code: "timeout", Message: msg}
	}
	switch {
	case strings.Contains(details, "per_try_idle_timeout"):
		return timeout(fmt.Sprintf("%s sent nothing for %s (its stream idle timeout).", capital(model), rt.timeouts.StreamIdle)), true
	case strings.Contains(details, "per_try_timeout"), strings.Contains(details, "response_timeout"):
		return timeout(fmt.Sprintf("%s did not start answering within %s (its response timeout).", capital(model), rt.timeouts.ResponseHeaders)), true
	case strings.Contains(details, "stream_idle_timeout"):
		return timeout(fmt.Sprintf("%s did not answer in time.", capital(model))), routed
	case strings.Contains(details, "request_payload_too_large"):
		return errTooLarge(), false
	case strings.Contains(details, "request_overall_timeout"):
		return &APIError{Status: status, Type: typeInvalidRequest, Code: "request_timeout",
			Message: "The request was not received in time."}, false
	case strings.Contains(details, "upstream_reset_before_response_started"), strings.Contains(details, "no_healthy_upstream"),
		strings.Contains(details, "cluster_not_found"):
		// A connection failure never reached the provider; a reset may have.
		reached := !strings.Contains(details, "connection_failure")
		return &APIError{Status: status, Type: typeServer,
			Message: fmt.Sprintf("The provider of %s could not be reached.", model)}, reached && routed
	}
	if status < 500 {
		return &APIError{Status: status, Type: typeInvalidRequest, Message: "The gateway refused the request (" + strconv.Itoa(status) + ")."}, false
	}
	return &APIError{Status: status, Type: typeServer, Message: "The gateway could not complete the request."}, routed
}

// envoyReplied takes one of Envoy's own replies with status as the
// answer, apiErr as the client sees it (reached: the provider may have
// had the request), and answers its response headers: the status stays,
// the body becomes the gateway's error (envoyReplyBody).
func (a *answer) envoyReplied(apiErr *APIError, reached bool, status int) *extprocv3.ProcessingResponse {
	a.envoyReply, a.mode, a.status, a.completed = apiErr, bodyEnvoyReply, apiErr.Status, true
	if !reached {
		a.delivery = unsent
	}
	var mut headers
	mut.Remove(routing.LocalReplyHeader)
	mut.Set("content-type", "application/json")
	if apiErr.Status != status {
		mut.Set(":status", strconv.Itoa(apiErr.Status))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}},
	}}
}

// envoyReplyBody replaces the body of one of Envoy's own replies, which
// Envoy sends whole (local replies are not streamed and have no
// trailers), with the gateway's error in the client's dialect.
func (a *answer) envoyReplyBody(d *dialect) *extprocv3.ProcessingResponse {
	body := d.errorBody(a.envoyReply)
	var mut headers
	mut.SetInt("content-length", int64(len(body)))
	return bodyReply(body, true, &mut)
}

// settledBody answers a response body chunk of an exchange already
// settled: the body of one of Envoy's own replies (which follows headers
// answered without a body), or chunks after a panic ended the stream.
func (a *answer) settledBody(d *dialect) *extprocv3.ProcessingResponse {
	switch a.mode {
	case bodyEnvoyReply:
		return a.envoyReplyBody(d)
	case bodyDropped:
		return bodyReply(nil, true, nil)
	}
	return bodyReply(nil, false, nil)
}

// brokenStatus is the status of an exchange that ended before its answer
// did: 504 when the provider's silence came near its timeout (Envoy then
// ends the stream; the quarter allows for the time between Envoy's read
// and the server's), 502 for a buffered answer cut short, else 499.
// Envoy ends the ext_proc stream the same way when the client leaves and
// when the provider resets mid-answer, so the gateway cannot tell those
// apart; both are recorded as 499. p is the phase it ended in, t the
// timeouts of its route, stream whether the client asked for a stream.
func (a *answer) brokenStatus(now time.Time, p phase, t routing.Timeouts, stream bool) int {
	switch {
	case a.mode == bodyDropped:
		return http.StatusInternalServerError
	case a.delivery == late: // Envoy's own 504 (its message_timeout)
		return http.StatusGatewayTimeout
	case p == phaseResponseHeaders && a.delivery == sent:
		limit := t.ResponseHeaders
		if stream && t.StreamIdle > 0 && (limit == 0 || t.StreamIdle < limit) {
			limit = t.StreamIdle
		}
		if limit > 0 && now.Sub(a.at.sent) >= limit*3/4 {
			return http.StatusGatewayTimeout
		}
	case p == phaseResponseBody && a.head.Stream:
		if idle := t.StreamIdle; idle > 0 && now.Sub(a.at.lastChunk) >= idle*3/4 {
			return http.StatusGatewayTimeout
		}
	case p == phaseResponseBody:
		// A buffered answer ending early: Envoy answered the client itself
		// (an upstream reset mid-body is its 502 while it holds the head).
		return http.StatusBadGateway
	}
	return 499 // the client closed the request
}

// fail ends the exchange with an error in the client's dialect as an
// immediate response.
func (ex *exchange) fail(err error) *extprocv3.ProcessingResponse {
	apiErr := toAPIError(err)
	logFailure(&ex.log, apiErr, err)
	ex.phase = phaseDone
	ex.answer.status, ex.answer.failure = apiErr.Status, apiErr
	resp := errorResponse(apiErr, ex.req.dialect.errorBody(apiErr))
	ex.capture.answer(resp.GetImmediateResponse().GetBody(), nil)
	return resp
}

// logFailure logs a request the gateway failed or refused.
func logFailure(log *exchangeLog, apiErr *APIError, err error) {
	if apiErr.Status >= 500 {
		log.Error("request failed", zap.Int("status", apiErr.Status), zap.Error(err))
	} else {
		log.Debug("request rejected", zap.Int("status", apiErr.Status), zap.String("code", apiErr.Code))
	}
}
