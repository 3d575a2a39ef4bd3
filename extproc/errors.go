package extproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"modelgate/authz"
	"modelgate/ratelimit"
	"modelgate/translate"
	"modelgate/translate/api"
)

// APIError is an error the client sees: an HTTP status and the members of
// the OpenAI error object. Cause is for logs only and never reaches the
// client.
type APIError struct {
	Status  int
	Message string
	Type    string
	Param   string // "" renders as null
	Code    string // "" renders as null
	Cause   error

	retryAfter time.Duration       // a Retry-After header, when set
	decision   *ratelimit.Decision // x-ratelimit-* headers of a refused admission
	noRetry    bool                // x-should-retry: false, for OpenAI's SDKs
}

// Error implements error.
func (e *APIError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Type, e.Message, e.Cause)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

// Unwrap returns the cause.
func (e *APIError) Unwrap() error { return e.Cause }

// OpenAI error types used by the gateway.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePermission     = "permission_error"
	typeServer         = "server_error"
)

// errorBody is the OpenAI ErrorResponse.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// typ and code are the error's type and code; empty for no error.
func (e *APIError) typ() string {
	if e == nil {
		return ""
	}
	return e.Type
}

func (e *APIError) code() string {
	if e == nil {
		return ""
	}
	return e.Code
}

// openAIBody renders the error as the OpenAI ErrorResponse JSON (the
// OpenAI dialect's errorBody).
func (e *APIError) openAIBody() []byte {
	b, err := json.Marshal(errorBody{Error: errorObject{
		Message: e.Message,
		Type:    e.Type,
		Param:   nullable(e.Param),
		Code:    nullable(e.Code),
	}})
	if err != nil { // cannot happen: the struct has only strings
		panic(err)
	}
	return b
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// toAPIError maps any error to the error the client sees. Errors that are
// not known become a generic 500; their detail goes only to the log.
func toAPIError(err error) *APIError {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var reqErr *api.RequestError
	if errors.As(err, &reqErr) {
		status := reqErr.Status
		if status == 0 {
			status = http.StatusBadRequest
		}
		return &APIError{Status: status, Type: typeInvalidRequest,
			Message: reqErr.Message, Param: reqErr.Param, Code: reqErr.Code, Cause: err}
	}
	switch {
	case errors.Is(err, translate.ErrUpstream):
		return errUpstream(err)
	case errors.Is(err, authz.ErrUnavailable):
		return errAuthUnavailable(err)
	case errors.Is(err, authz.ErrUnauthenticated):
		return errInvalidAPIKey(err)
	case errors.Is(err, authz.ErrDisabled):
		return &APIError{Status: http.StatusForbidden, Type: typePermission, Code: "permission_denied",
			Message: "This API key or its account is disabled.", Cause: err}
	}
	return errInternal(err)
}

func errInternal(cause error) *APIError {
	return &APIError{Status: http.StatusInternalServerError, Type: typeServer,
		Message: "The gateway had an internal error while processing your request.", Cause: cause}
}

func errMissingAPIKey() *APIError {
	// The specification's catalogue answers a missing key as an invalid
	// one: code invalid_api_key, as OpenAI does.
	return &APIError{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
		Message: "You didn't provide an API key. Provide your API key in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY), or in an x-api-key header."}
}

func errInvalidAPIKey(cause error) *APIError {
	return &APIError{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
		Message: "Incorrect API key provided.", Cause: cause}
}

func errUnknownURL(method, path string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "unknown_url",
		Message: fmt.Sprintf("Invalid URL (%s %s)", quoted(method), quoted(path))}
}

// errUpgrade refuses a request to switch protocols: the gateway serves
// HTTP only, and a client of the Responses API's WebSocket mode (Codex)
// falls back to HTTP at once on a 426, where it retries other statuses.
func errUpgrade(protocol string) *APIError {
	return &APIError{Status: http.StatusUpgradeRequired, Type: typeInvalidRequest, Code: "upgrade_not_supported",
		Message: fmt.Sprintf("This gateway does not switch protocols (Upgrade: %s); send the request over HTTP, such as POST /v1/responses with \"stream\": true.", quoted(protocol))}
}

func errModelNotFound(model string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` does not exist.", quoted(model))}
}

func errModelNotAllowed(model string) *APIError {
	return &APIError{Status: http.StatusForbidden, Type: typePermission, Param: "model", Code: "permission_denied",
		Message: fmt.Sprintf("This API key may not use the model `%s`.", quoted(model))}
}

// errTooLarge has the message of Envoy's 413 as the bootstrap's
// local_reply_config words it, which rewrites every 413 to it.
func errTooLarge() *APIError {
	return &APIError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
		Message: "The request body is larger than the gateway accepts."}
}

// errUpstream is a provider answer no translator could use.
func errUpstream(cause error) *APIError {
	return &APIError{Status: http.StatusBadGateway, Type: typeServer,
		Message: "The model's provider sent an answer the gateway could not use.", Cause: cause}
}

// errAuthUnavailable: the key store did not answer in time.
func errAuthUnavailable(cause error) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "auth_unavailable",
		Message: "The gateway cannot check API keys right now; please retry.", Cause: cause, retryAfter: time.Second}
}

func errUnsupportedMediaType(contentType string) *APIError {
	return &APIError{Status: http.StatusUnsupportedMediaType, Type: typeInvalidRequest, Code: "unsupported_media_type",
		Message: fmt.Sprintf("Unsupported content type %q: this endpoint takes application/json.", quoted(contentType))}
}

func errMissingBody() *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest,
		Message: "The request has no body: this endpoint takes a JSON body."}
}

func errProviderCredentials(cause error) *APIError {
	return &APIError{Status: http.StatusBadGateway, Type: typeServer,
		Message: "The gateway could not obtain credentials for the provider.", Cause: cause}
}

// maxQuoted bounds client input quoted in error messages.
const maxQuoted = 256

// quoted shortens client input for an error message.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

func capital(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// errorResponse renders an APIError as an immediate response with body
// (the error in the client's dialect: dialect.errorBody), with
// Retry-After and x-ratelimit-* headers when it has them.
func errorResponse(e *APIError, body []byte) *extprocv3.ProcessingResponse {
	var h headers
	h.Set("content-type", "application/json")
	if e.retryAfter > 0 {
		h.Set("retry-after", strconv.FormatInt(int64(math.Ceil(e.retryAfter.Seconds())), 10))
	}
	if e.noRetry {
		h.Set("x-should-retry", "false")
	}
	rateHeaders(e.decision, &h)
	return localReply(e.Status, &h, body, "modelgate_"+strconv.Itoa(e.Status))
}
