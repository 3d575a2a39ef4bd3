package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"modelgate/authz"
)

// apiError is what a client is told about a failure: a status and the
// OpenAI-style type and message.
type apiError struct {
	Status  int
	Type    string
	Message string
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 with a message for the client.
func badRequest(format string, args ...any) error {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

// errRevoked refuses changes to a revoked key: revocation is for good.
var errRevoked = errors.New("the key is revoked; issue a new one")

// toAPIError maps any error to what the client is told. Store errors that
// are not "not found" or "exists" become a generic 500; their detail goes
// only to the log.
func (h *Handler) toAPIError(r *http.Request, err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, authz.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Type: "not_found_error", Message: err.Error()}
	case errors.Is(err, authz.ErrExists):
		return &apiError{Status: http.StatusConflict, Type: "conflict_error", Message: err.Error()}
	case errors.Is(err, errRevoked):
		return &apiError{Status: http.StatusConflict, Type: "conflict_error", Message: err.Error()}
	}
	h.cfg.Logger.Error("admin request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "internal error; see the gateway's log"}
}

// unauthorized is the answer to an API request without the admin token.
var unauthorized = &apiError{Status: http.StatusUnauthorized, Type: "authentication_error",
	Message: "a valid admin token is required, as Authorization: Bearer followed by the token"}

// tooManyWrongTokens is the answer to a wrong admin token from an address
// the throttle holds back.
var tooManyWrongTokens = &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error",
	Message: "too many wrong admin tokens from this address; wrong tokens are refused until Retry-After (the right one is always accepted)"}

// writeJSON writes v as the JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // our own types always marshal
		status, body = http.StatusInternalServerError, []byte(`{"error":{"message":"internal error","type":"server_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n')) //nolint:errcheck // the client went away
}

// writeAPIError renders an error as {"error":{"message","type"}}.
func writeAPIError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="modelgate admin"`)
	}
	type body struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	writeJSON(w, e.Status, struct {
		Error body `json:"error"`
	}{body{e.Message, e.Type}})
}
