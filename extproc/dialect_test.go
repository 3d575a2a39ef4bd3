package extproc

import (
	"encoding/json"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// A client of the Messages API gets its API's shapes from every answer
// of the gateway's own: a model retrieved by id, the refusal of an unknown
// one, and the 426 for a WebSocket upgrade on its endpoints. Before,
// these came in the OpenAI API's shape.
func TestMessagesClientsGetTheirShape(t *testing.T) {
	s, _, _ := newFaultServer(t)
	anthropic := func(method, path string, kv ...string) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false,
			append([]string{":method", method, ":path", path, "x-api-key", "sk-client", "anthropic-version", "2023-06-01"}, kv...)...)}}
	}
	type errorBody struct {
		Type  string
		Error struct{ Type, Message string }
	}
	for _, tt := range []struct {
		name   string
		msg    *extprocv3.ProcessingRequest
		status int
		check  func(body []byte) bool
	}{
		{"a model", anthropic("GET", "/v1/models/gpt-x"), 200, func(b []byte) bool {
			var m struct{ Type, ID, DisplayName, CreatedAt string }
			return json.Unmarshal(b, &m) == nil && m.Type == "model" && m.ID == "gpt-x"
		}},
		{"an unknown model", anthropic("GET", "/v1/models/nope"), 404, func(b []byte) bool {
			var e errorBody
			return json.Unmarshal(b, &e) == nil && e.Type == "error" && e.Error.Type == "not_found_error"
		}},
		{"an upgrade", anthropic("POST", "/v1/messages", "upgrade", "websocket", "connection", "upgrade"), 426, func(b []byte) bool {
			var e errorBody
			return json.Unmarshal(b, &e) == nil && e.Type == "error" && e.Error.Type == "invalid_request_error" && e.Error.Message != ""
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := play(t, s, false, tt.msg)
			ir := out[0].GetImmediateResponse()
			if ir == nil || int(ir.GetStatus().GetCode()) != tt.status || !tt.check(ir.GetBody()) {
				t.Errorf("answer %v, want %d in the Messages API's shape", out[0], tt.status)
			}
		})
	}
}

// Each dialect reads the key where its clients put it first: OpenAI's
// clients as Authorization: Bearer, Anthropic's as x-api-key (Claude Code
// with an auth token sends Bearer, which counts when x-api-key is absent).
func TestDialectsReadTheirKey(t *testing.T) {
	both := readHeaders(hdrs(false, "authorization", "Bearer sk-bearer", "x-api-key", "sk-x-api-key").GetHeaders())
	bearerOnly := readHeaders(hdrs(false, "authorization", "Bearer sk-bearer").GetHeaders())
	for _, tt := range []struct {
		d    *dialect
		hm   headerMap
		want string
	}{
		{openAIDialect, both, "sk-bearer"},
		{anthropicDialect, both, "sk-x-api-key"},
		{anthropicDialect, bearerOnly, "sk-bearer"},
		{openAIDialect, readHeaders(hdrs(false, "x-api-key", " sk-x ").GetHeaders()), "sk-x"},
	} {
		if got, ok := tt.d.key(tt.hm); !ok || got != tt.want {
			t.Errorf("%s: key %q (%v), want %q", tt.d.name, got, ok, tt.want)
		}
	}
	if _, ok := anthropicDialect.key(readHeaders(hdrs(false, "authorization", "Basic abc").GetHeaders())); ok {
		t.Error("a Basic authorization counts as a key")
	}
}
