package extproc

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
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

// fail ends the exchange with an error in the client's dialect as an
// immediate response.
func (ex *exchange) fail(err error) *extprocv3.ProcessingResponse {
	apiErr := toAPIError(err)
	logFailure(&ex.log, apiErr, err)
	ex.phase = phaseDone
	ex.answer.status, ex.answer.failure = apiErr.Status, apiErr
	resp := errorResponse(apiErr, ex.req.dialect.errorBody(apiErr))
	ex.capture.answer(resp.GetImmediateResponse().GetBody())
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
