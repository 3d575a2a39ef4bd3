package extproc

import (
	"encoding/json"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/envoy"
	"modelgate/translate/api/spec"
)

// Every immediate response carries the marker the bootstrap's first
// local_reply_config mapper matches, so that Envoy leaves the server's
// replies as they are; replies that are not immediate carry none.
func TestImmediateRepliesAreMarked(t *testing.T) {
	if gatewayReplyKey != envoy.GatewayReplyKey {
		t.Fatalf("marker %q, the bootstrap matches %q", gatewayReplyKey, envoy.GatewayReplyKey)
	}
	s, _, _ := newFaultServer(t)
	marked := func(r *extprocv3.ProcessingResponse) bool {
		return r.GetDynamicMetadata().GetFields()["io.modelgate"].GetStructValue().GetFields()[gatewayReplyKey].GetBoolValue()
	}
	// A refusal at the headers (no key).
	out := play(t, s, false, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: hdrs(false, ":method", "POST", ":path", "/v1/chat/completions")}})
	if out[0].GetImmediateResponse().GetStatus().GetCode() != 401 || !marked(out[0]) {
		t.Errorf("401 %v: want an immediate response with the marker", out[0])
	}
	// A refusal at the body, and an answer that is not immediate.
	out = play(t, s, false, reqHeaders(), reqBody(`{"model":"gpt-x","messages":[]}`))
	if out[0].GetImmediateResponse() != nil || marked(out[0]) || out[1].GetImmediateResponse().GetStatus().GetCode() != 400 || !marked(out[1]) {
		t.Errorf("replies %v: want the headers passed unmarked and a marked immediate 400", out)
	}
	// A reply that also writes usage keeps it beside the marker.
	r := immediate(500, []byte(`{}`))
	r.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{"io.modelgate": structpb.NewStructValue(
		&structpb.Struct{Fields: map[string]*structpb.Value{"model": structpb.NewStringValue("gpt-x")}})}}
	s.markGatewayReply(r)
	if ns := r.GetDynamicMetadata().GetFields()["io.modelgate"].GetStructValue().GetFields(); ns["model"].GetStringValue() != "gpt-x" || !ns[gatewayReplyKey].GetBoolValue() {
		t.Errorf("metadata %v", r.GetDynamicMetadata())
	}
}

// Where Envoy cannot mark its own replies (Envoy Gateway has no
// local_reply_config), the server asks for response.code_details: a
// response whose details are not via_upstream is Envoy's, and becomes the
// gateway's error naming the model, not a provider error.
func TestEnvoyRepliesByCodeDetails(t *testing.T) {
	attrs := func(details string) map[string]*structpb.Struct {
		return map[string]*structpb.Struct{extProcAttributes: {Fields: map[string]*structpb.Value{
			codeDetailsAttribute: structpb.NewStringValue(details)}}}
	}
	chat := `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`
	t.Run("a per-try timeout", func(t *testing.T) {
		s, usage, _ := newFaultServer(t)
		h := respHeaders(false, ":status", "504", "content-type", "text/plain")
		h.Attributes = attrs("upstream_per_try_timeout")
		out := play(t, s, false, reqHeaders(), reqBody(chat), h, respBody("upstream request timeout", true))
		body := out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
		spec.ValidateT(t, "ErrorResponse", body)
		var e struct {
			Error struct{ Message, Code string }
		}
		json.Unmarshal(body, &e)
		if !strings.Contains(e.Error.Message, "did not start answering within 1m0s") || e.Error.Code != "timeout" {
			t.Errorf("error %+v, want the model's response timeout", e.Error)
		}
		if rec := usage.only(t); rec.Status != 504 {
			t.Errorf("record %+v", rec)
		}
	})
	t.Run("the provider's own 504", func(t *testing.T) {
		s, usage, _ := newFaultServer(t)
		h := respHeaders(false, ":status", "504", "content-type", "application/json")
		h.Attributes = attrs("via_upstream")
		out := play(t, s, false, reqHeaders(), reqBody(chat), h,
			respBody(`{"error":{"message":"upstream busy","type":"server_error"}}`, true))
		body := out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
		if !strings.Contains(string(body), "upstream busy") {
			t.Errorf("body %s, want the provider's error passed on", body)
		}
		if rec := usage.only(t); rec.Status != 504 {
			t.Errorf("record %+v", rec)
		}
	})
}
