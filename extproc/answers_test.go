package extproc

import (
	"testing"

	"modelgate/translate/api/spec"
)

// A request for JSON gets JSON or a 502, never a stream: a provider that
// answers it with SSE would reach the client as a 200 it cannot read.
func TestJSONRequestNeverGetsAStream(t *testing.T) {
	s, usage, _ := newFaultServer(t)
	out := play(t, s, false, reqHeaders(), reqBody(`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`),
		respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
	ir := out[2].GetImmediateResponse()
	if ir.GetStatus().GetCode() != 502 {
		t.Fatalf("reply %v, want an immediate 502", out[2])
	}
	spec.ValidateT(t, "ErrorResponse", ir.GetBody())
	if rec := usage.only(t); rec.Status != 502 {
		t.Errorf("record %+v, want 502", rec)
	}
}

// The ledger records the status the client got: a provider's 401 (the
// provider refused the gateway's credential, not the client's key) reaches
// the client as 502, and is recorded as 502.
func TestRecordedStatusIsTheClients(t *testing.T) {
	s, usage, _ := newFaultServer(t)
	out := play(t, s, false, reqHeaders(), reqBody(`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`),
		respHeaders(false, ":status", "401", "content-type", "application/json"),
		respBody(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, true))
	var status string
	for _, h := range out[2].GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if h.GetHeader().GetKey() == ":status" {
			status = string(h.GetHeader().GetRawValue())
		}
	}
	if status != "502" {
		t.Fatalf("the client's status %q, want 502", status)
	}
	if rec := usage.only(t); rec.Status != 502 {
		t.Errorf("record %+v, want the client's 502", rec)
	}
}
