package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
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

// Bounds on what the gateway passes on of a provider's error.
const (
	// MaxErrorMessage is the longest provider message passed on; longer
	// ones are cut (at a character boundary) and end in "…".
	MaxErrorMessage = 4096
	// maxErrorMember bounds a provider's type, param and code.
	maxErrorMember = 256
	// maxErrorText bounds the text quoted from a non-JSON error body.
	maxErrorText = 512
	// maxTitle bounds the title quoted from an HTML error page.
	maxTitle = 200
)

// MarshalError renders {"error": obj}. A request rejected for its length
// gets OpenAI's code context_length_exceeded, whatever the provider called
// it, so clients can handle it in one way. Whoever built obj, the client
// gets a message (a generic one when it is empty) of at most
// MaxErrorMessage bytes, and an empty param or code is null.
func MarshalError(obj ErrorObject) []byte {
	obj.Message = Clip(strings.TrimSpace(obj.Message), MaxErrorMessage)
	if obj.Message == "" {
		obj.Message = "The provider returned an error without a message."
		if obj.Type == "invalid_request_error" {
			obj.Message = "The request was rejected without a message."
		}
	}
	obj.Type = Clip(obj.Type, maxErrorMember)
	if obj.Type == "" {
		obj.Type = "server_error"
	}
	obj.Param, obj.Code = clipMember(obj.Param), clipMember(obj.Code)
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

// clipMember is nil for a missing or empty member, else it bounded.
func clipMember(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	v := Clip(*s, maxErrorMember)
	return &v
}

// Nullable is nil for "", for ErrorObject's Param and Code.
func Nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
// response. A body that already is one keeps its members (param and code
// stay null when the provider's were null or absent); anything else (HTML,
// text, another provider's shape) becomes a message naming the status,
// with a type derived from it. Messages are bounded and never empty.
func NormalizeError(status int, body []byte) []byte {
	var in struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &in) == nil && !jsonscan.IsNull(in.Error) {
		var obj struct {
			Message json.RawMessage `json:"message"`
			Type    json.RawMessage `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		var msg string
		if json.Unmarshal(in.Error, &obj) == nil && json.Unmarshal(obj.Message, &msg) == nil && !jsonscan.IsNull(obj.Message) {
			out := ErrorObject{Message: ProviderMessage(status, msg), Type: errorType(status),
				Param: stringish(obj.Param), Code: stringish(obj.Code)}
			var typ string
			if json.Unmarshal(obj.Type, &typ) == nil && typ != "" {
				out.Type = typ
			}
			return MarshalError(out)
		}
		if json.Unmarshal(in.Error, &msg) == nil && strings.TrimSpace(msg) != "" {
			return MarshalError(ErrorObject{Message: ProviderMessage(status, msg), Type: errorType(status)})
		}
	}
	return MarshalError(ErrorObject{Message: providerMessage(status, body), Type: errorType(status)})
}

// ProviderMessage is a provider's error message as the client gets it:
// bounded, and when empty a generic message naming the status.
func ProviderMessage(status int, msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return statusMessage(status) + "."
	}
	return Clip(strings.ToValidUTF8(msg, "\uFFFD"), MaxErrorMessage)
}

// statusMessage is "The provider returned HTTP 503 Service Unavailable".
func statusMessage(status int) string {
	msg := "The provider returned HTTP " + strconv.Itoa(status)
	if text := http.StatusText(status); text != "" {
		msg += " " + text
	}
	return msg
}

// stringish reads a member that should be a string or null; numbers (some
// providers send numeric codes) become their text. Null, absent, an
// empty string and anything else are nil (null for the client).
func stringish(raw json.RawMessage) *string {
	if jsonscan.IsNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return Nullable(s)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		v := n.String()
		return &v
	}
	return nil
}

// providerMessage describes an error body that is not an OpenAI error:
// the status, and what the body says in a few hundred bytes of clean
// text. An HTML page (a proxy's) gives its title, other JSON its
// message or detail, text itself.
func providerMessage(status int, body []byte) string {
	msg := statusMessage(status)
	text := bodyText(body)
	if text == "" {
		return msg + "."
	}
	return msg + ": " + text
}

var (
	titleTag = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	h1Tag    = regexp.MustCompile(`(?is)<h1[^>]*>(.*?)</h1>`)
	anyTag   = regexp.MustCompile(`(?s)<[^>]*>`)
)

// bodyText is the clean text of a non-OpenAI error body, empty when it
// has none worth passing on.
func bodyText(body []byte) string {
	t := bytes.TrimSpace(body)
	if len(t) == 0 {
		return ""
	}
	if json.Valid(t) {
		var m map[string]json.RawMessage
		if json.Unmarshal(t, &m) == nil {
			for _, key := range []string{"message", "detail", "error_message", "error_description", "msg", "error"} {
				var s string
				if json.Unmarshal(m[key], &s) == nil && strings.TrimSpace(s) != "" {
					return Clip(cleanText(s), maxErrorText)
				}
			}
		}
		return Clip(cleanText(string(t)), maxErrorText)
	}
	if t[0] == '<' || bytes.Contains(bytes.ToLower(t[:min(len(t), 512)]), []byte("<html")) {
		for _, re := range []*regexp.Regexp{titleTag, h1Tag} {
			if m := re.FindSubmatch(t[:min(len(t), 64<<10)]); m != nil {
				title := cleanText(html.UnescapeString(anyTag.ReplaceAllString(string(m[1]), " ")))
				if title != "" {
					return Clip(title, maxTitle)
				}
			}
		}
		return ""
	}
	return Clip(cleanText(string(t[:min(len(t), 4*maxErrorText)])), maxErrorText)
}

// cleanText makes s valid UTF-8 on one line: control characters and runs
// of white space become one space.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Clip returns s cut to at most n bytes at a character boundary, ending
// in "…" when it was cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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

// Unusable is an error wrapping translate.ErrUpstream: a provider's
// success answer is not what was due. what says how, for the log.
func Unusable(what string) error {
	return fmt.Errorf("%s: %w", what, translate.ErrUpstream)
}

// AsUnusable wraps err, met while translating a provider's success
// answer, in translate.ErrUpstream. nil, a *RequestError (the client's
// error, such as a refused prompt) and errors already wrapping
// ErrUpstream are returned as they are.
func AsUnusable(err error) error {
	var re *RequestError
	if err == nil || errors.Is(err, translate.ErrUpstream) || errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("%w: %w", translate.ErrUpstream, err)
}

// DecodeUpstream decodes a provider's success body, which must be one
// JSON object, into v. Anything else (an empty body, text, HTML, an
// array, null, JSON that does not match v) is an error wrapping
// translate.ErrUpstream; what names the expected answer for the log.
func DecodeUpstream(body []byte, v any, what string) error {
	t := jsonscan.TrimSpace(body)
	switch {
	case len(t) == 0:
		return Unusable("the provider's " + what + " is empty")
	case t[0] != '{':
		return Unusable("the provider's " + what + " is not a JSON object")
	}
	if err := json.Unmarshal(t, v); err != nil {
		return fmt.Errorf("the provider's %s does not decode: %w: %w", what, translate.ErrUpstream, err)
	}
	return nil
}

// ObjectArray reports whether raw is a JSON array of objects (an empty
// array is one).
func ObjectArray(raw json.RawMessage) bool {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || items == nil {
		return false
	}
	for _, it := range items {
		if it = jsonscan.TrimSpace(it); len(it) == 0 || it[0] != '{' {
			return false
		}
	}
	return true
}

// ClientStatus maps a provider's error status to the client's: a redirect
// or interim status is no answer the client can use, and a provider
// refusing the gateway's own credential (401, 403) is the gateway's
// upstream failure, not the client's authentication problem.
func ClientStatus(status int) int {
	switch {
	case status < 200 || status >= 300 && status < 400:
		return http.StatusBadGateway
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return http.StatusBadGateway
	}
	return status
}
