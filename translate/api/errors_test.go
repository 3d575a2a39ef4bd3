package api

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"modelgate/translate/api/spec"
)

// errorOf decodes a normalized error body; param and code stay raw so
// that null and "" differ.
func errorOf(t *testing.T, out []byte) (message, typ string, param, code json.RawMessage) {
	t.Helper()
	spec.ValidateT(t, "ErrorResponse", out)
	var e struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	return e.Error.Message, e.Error.Type, e.Error.Param, e.Error.Code
}

func TestNormalizeErrorParamAndCode(t *testing.T) {
	tests := []struct {
		name, body  string
		param, code string // JSON
	}{
		{"null", `{"error":{"message":"m","param":null,"code":null}}`, "null", "null"},
		{"absent", `{"error":{"message":"m"}}`, "null", "null"},
		{"empty strings", `{"error":{"message":"m","param":"","code":""}}`, "null", "null"},
		{"strings", `{"error":{"message":"m","param":"messages[0]","code":"invalid_value"}}`, `"messages[0]"`, `"invalid_value"`},
		{"numeric code", `{"error":{"message":"m","code":429}}`, "null", `"429"`},
		{"objects", `{"error":{"message":"m","param":{"a":1},"code":[1]}}`, "null", "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, _, param, code := errorOf(t, NormalizeError(400, []byte(tt.body)))
			if msg != "m" || string(param) != tt.param || string(code) != tt.code {
				t.Errorf("message %q, param %s, code %s; want m, %s, %s", msg, param, code, tt.param, tt.code)
			}
		})
	}
}

func TestNormalizeErrorMessage(t *testing.T) {
	long := strings.Repeat("é", 5000) // 10,000 bytes
	page := "<!DOCTYPE html>\n<html><head><style>body{color:red}</style><title>\n  503 Service\tTemporarily &amp; Unavailable </title></head><body>" +
		strings.Repeat("<p>filler</p>", 10000) + "</body></html>"
	tests := []struct {
		name   string
		status int
		body   string
		want   string // the whole message, or its start when it ends in …
	}{
		{"empty message", 500, `{"error":{"message":"","type":"server_error"}}`, "The provider returned HTTP 500 Internal Server Error."},
		{"blank message", 400, `{"error":{"message":"  \n"}}`, "The provider returned HTTP 400 Bad Request."},
		{"null message", 503, `{"error":{"message":null}}`, "The provider returned HTTP 503 Service Unavailable: {\"error\":{\"message\":null}}"},
		{"error without message", 502, `{"error":{}}`, "The provider returned HTTP 502 Bad Gateway: {\"error\":{}}"},
		{"empty error string", 404, `{"error":""}`, "The provider returned HTTP 404 Not Found: {\"error\":\"\"}"},
		{"unknown status", 529, ``, "The provider returned HTTP 529."},
		{"long message", 400, `{"error":{"message":"` + long + `"}}`, strings.Repeat("é", MaxErrorMessage/2) + "…"},
		{"html page", 503, page, "The provider returned HTTP 503 Service Unavailable: 503 Service Temporarily & Unavailable"},
		{"html without title", 502, "<html><body><h1>Bad <b>gateway</b></h1>" + strings.Repeat("x", 100000) + "</body></html>",
			"The provider returned HTTP 502 Bad Gateway: Bad gateway"},
		{"html fragment", 500, "<div>" + strings.Repeat("<span>a</span>", 1000) + "</div>", "The provider returned HTTP 500 Internal Server Error."},
		{"plain text", 429, "  slow\r\n\tdown\x00 please ", "The provider returned HTTP 429 Too Many Requests: slow down please"},
		{"long text", 500, strings.Repeat("abc ", 10000), "The provider returned HTTP 500 Internal Server Error: " + strings.TrimSpace(strings.Repeat("abc ", maxErrorText/4)) + "…"},
		{"detail", 404, `{"detail":"Not Found"}`, "The provider returned HTTP 404 Not Found: Not Found"},
		{"top-level message", 400, `{"message":"bad input","code":1}`, "The provider returned HTTP 400 Bad Request: bad input"},
		{"invalid utf-8", 400, "bad \xff byte", "The provider returned HTTP 400 Bad Request: bad \uFFFD byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := NormalizeError(tt.status, []byte(tt.body))
			msg, typ, _, _ := errorOf(t, out)
			if prefix, cut := strings.CutSuffix(tt.want, "…"); cut {
				if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, "…") {
					t.Errorf("message %.200q…, want it to start with %.200q and end in …", msg, prefix)
				}
			} else if msg != tt.want {
				t.Errorf("message %.300q, want %q", msg, tt.want)
			}
			if len(msg) > MaxErrorMessage+len("…") || !utf8.ValidString(msg) || typ == "" {
				t.Errorf("message of %d bytes (valid UTF-8: %v), type %q", len(msg), utf8.ValidString(msg), typ)
			}
			if tt.name != "long message" && len(msg) > 1024 {
				t.Errorf("message of %d bytes for a body that is no OpenAI error", len(msg))
			}
		})
	}
}

// Whoever builds an ErrorObject, the client gets a message and no "".
func TestMarshalErrorGuards(t *testing.T) {
	empty := ""
	msg, typ, param, code := errorOf(t, MarshalError(ErrorObject{Param: &empty, Code: &empty}))
	if msg == "" || typ != "server_error" || string(param) != "null" || string(code) != "null" {
		t.Errorf("message %q, type %q, param %s, code %s", msg, typ, param, code)
	}
	long := strings.Repeat("x", 3*MaxErrorMessage)
	if msg, _, _, _ := errorOf(t, MarshalError(ErrorObject{Type: "server_error", Message: long})); len(msg) != MaxErrorMessage+len("…") {
		t.Errorf("message of %d bytes", len(msg))
	}
}

func TestClip(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: no half character
		{"", 0, ""},
	} {
		if got := Clip(tt.s, tt.n); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
