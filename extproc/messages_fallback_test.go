package extproc

import (
	"encoding/json"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// messagesHeaders are a Messages API client's request headers for path.
func messagesHeaders(path string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false,
		":method", "POST", ":path", path, "x-api-key", "sk-client", "anthropic-version", "2023-06-01", "content-type", "application/json")}}
}

// count_tokens on a Fallback model whose deployments do not all count
// tokens themselves is the gateway's estimate, answered before routing,
// whichever deployment an attempt would have reached.
func TestCountTokensOnFallbackModelEstimated(t *testing.T) {
	s, _, _ := newFallbackServer(t)
	out := play(t, s, false, messagesHeaders("/v1/messages/count_tokens"),
		reqBody(`{"model":"smart","messages":[{"role":"user","content":"How many tokens is this?"}]}`))
	ir := out[1].GetImmediateResponse()
	var count struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if ir == nil || ir.GetStatus().GetCode() != 200 || json.Unmarshal(ir.GetBody(), &count) != nil || count.InputTokens == 0 {
		t.Fatalf("count_tokens: %v", out[1])
	}
}

// An attempt of a Fallback model that cannot translate a Messages API
// request refuses it in the Messages API's shape, which the router-level
// stream passes on.
func TestMessagesAttemptErrorInAnthropicShape(t *testing.T) {
	s, _, _ := newFallbackServer(t)
	shared := map[string]string{":method": "POST", ":path": "/v1/messages", ":authority": "gw", "content-type": "application/json",
		"x-api-key": "sk-client", "x-request-id": "r1"}
	// OpenAI gets Messages through the chat bridge, which has no word for
	// a block of a type it does not know.
	body := `{"model":"smart","max_tokens":10,"messages":[{"role":"user","content":[{"type":"hologram","data":"x"}]}]}`
	out := play(t, s, false, attemptMsg(shared, "openai", 1, nil), reqBody(body))
	ir := out[1].GetImmediateResponse()
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if ir == nil || ir.GetStatus().GetCode() != 400 || json.Unmarshal(ir.GetBody(), &e) != nil || e.Type != "error" ||
		e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "hologram") {
		t.Fatalf("attempt reply: %v", out[1])
	}
}
