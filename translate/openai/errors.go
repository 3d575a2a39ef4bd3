package openai

import (
	"encoding/json"
	"net/http"
	"strings"
)

// RequestError is a client request that does not match the API. Its type
// is always invalid_request_error; Param and Code are empty when null.
// Status is the HTTP status, 400 when zero (413 and 415 are the others
// the specification uses for bad requests).
type RequestError struct {
	Param   string
	Code    string
	Message string
	Status  int
}

// Error implements error.
func (e *RequestError) Error() string { return "invalid request: " + e.Message }

// ClientError returns the members the client sees; packages that cannot
// import this one (test helpers) read them through it.
func (e *RequestError) ClientError() (param, code, message string) { return e.Param, e.Code, e.Message }

// ErrorObject is the OpenAI error object; Param and Code may be null.
type ErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type errorResponse struct {
	Error ErrorObject `json:"error"`
}

// MarshalError renders {"error": obj}. A request rejected for its length
// gets OpenAI's code context_length_exceeded, whatever the provider called
// it, so clients can handle it in one way.
func MarshalError(obj ErrorObject) []byte {
	if obj.Type == "invalid_request_error" && tooLong(obj.Message) {
		code := "context_length_exceeded"
		obj.Code = &code
	}
	b, err := json.Marshal(errorResponse{Error: obj})
	if err != nil { // cannot happen: strings only
		panic(err)
	}
	return b
}

// errorType is the OpenAI error type for an HTTP status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500 || status < 400:
		return "server_error"
	}
	return "invalid_request_error"
}

// NormalizeError turns a provider's error body into the OpenAI error
// response. A body that already is one keeps its members; anything else
// (HTML, text, another provider's shape) is wrapped with a type derived from
// the status.
func NormalizeError(status int, body []byte) []byte {
	var in struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &in) == nil && len(in.Error) > 0 {
		var obj struct {
			Message *string         `json:"message"`
			Type    *string         `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(in.Error, &obj) == nil && obj.Message != nil {
			out := ErrorObject{Message: *obj.Message, Type: errorType(status), Param: stringish(obj.Param), Code: stringish(obj.Code)}
			if obj.Type != nil && *obj.Type != "" {
				out.Type = *obj.Type
			}
			return MarshalError(out)
		}
		var s string
		if json.Unmarshal(in.Error, &s) == nil && s != "" {
			return MarshalError(ErrorObject{Message: s, Type: errorType(status)})
		}
	}
	return MarshalError(ErrorObject{Message: providerMessage(status, body), Type: errorType(status)})
}

// stringish reads a member that should be a string or null; numbers (some
// providers send numeric codes) become their text.
func stringish(raw json.RawMessage) *string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return &s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		v := n.String()
		return &v
	}
	return nil
}

func providerMessage(status int, body []byte) string {
	msg := "The provider returned HTTP " + http.StatusText(status)
	text := strings.TrimSpace(string(body))
	if text == "" || !json.Valid(body) && strings.HasPrefix(text, "<") {
		return msg + "."
	}
	if len(text) > 512 {
		text = text[:512] + "…"
	}
	return msg + ": " + strings.ToValidUTF8(text, "\uFFFD")
}

// ProviderError normalizes a provider's error response for the client: its
// message and codes pass, except when the provider refused the gateway's
// credential, whose message can name the provider key.
func ProviderError(status int, body []byte) []byte {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		code := "provider_authentication_failed"
		return MarshalError(ErrorObject{Type: "server_error", Code: &code,
			Message: "The provider rejected the gateway's credentials for this backend."})
	}
	return NormalizeError(ClientStatus(status), body)
}

// tooLong recognizes the providers' messages for an over-long context.
func tooLong(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"prompt is too long", "context length", "context window", "maximum context",
		"input is too long", "too many input tokens", "exceeds the maximum number of tokens", "input token count"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
