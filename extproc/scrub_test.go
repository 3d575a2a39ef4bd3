package extproc

import (
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/envoy/routing"
	"modelgate/extproc/redact"
)

// A provider error that quotes the key it was sent (OpenAI's "Incorrect
// API key provided: …"), or any credential, reaches the client with the
// credential hidden: in an error answer, in a stream's error event, and on
// the Messages API as relayed.
func TestProviderErrorsNeverQuoteTheBackendsKey(t *testing.T) {
	const key = "sk-proj-operators0secret0key0abcdefghij"
	const otherKey = "AKIAIOSFODNN7EXAMPLE"
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Metrics: m, Routing: routing.Table{
		Backends: []routing.Backend{{Name: "b", Provider: "openai"}, {Name: "a", Provider: "anthropic"}},
		Models: []routing.Model{{ID: "gpt-x", Deployments: []routing.Deployment{{Backend: "b", Model: "up"}}},
			{ID: "claude", Deployments: []routing.Deployment{{Backend: "a", Model: "claude-up"}}}}},
		Credentials: map[string]Credentials{"b": {APIKey: key}, "a": {APIKey: "anthropic-operator-key-123456"}},
	}, stubAuth{}, &usageLog{})
	if err != nil {
		t.Fatal(err)
	}
	messages := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false,
		":method", "POST", ":path", "/v1/messages", "x-api-key", "sk-client", "anthropic-version", "2023-06-01")}}
	for _, tt := range []struct {
		name   string
		msgs   []*extprocv3.ProcessingRequest
		secret []string
	}{
		{"401 quoting the key", []*extprocv3.ProcessingRequest{reqHeaders(), reqBody(`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`),
			respHeaders(false, ":status", "401", "content-type", "application/json"),
			respBody(`{"error":{"message":"Incorrect API key provided: `+key+`. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, true)},
			[]string{key}},
		{"400 quoting a credential", []*extprocv3.ProcessingRequest{reqHeaders(), reqBody(`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`),
			respHeaders(false, ":status", "400", "content-type", "application/json"),
			respBody(`{"error":{"message":"The upstream rejected credential `+otherKey+` for this organization","type":"invalid_request_error"}}`, true)},
			[]string{otherKey}},
		{"a stream's error event", []*extprocv3.ProcessingRequest{reqHeaders(), reqBody(streamChat),
			respHeaders(false, ":status", "200", "content-type", "text/event-stream"),
			respBody(chunk("Hello"), false),
			respBody(`data: {"error":{"message":"Key `+key+` is over its quota","type":"server_error"}}`+"\n\n", true)},
			[]string{key}},
		{"the Messages API relayed", []*extprocv3.ProcessingRequest{messages,
			reqBody(`{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`),
			respHeaders(false, ":status", "400", "content-type", "application/json"),
			respBody(`{"type":"error","error":{"type":"invalid_request_error","message":"key anthropic-operator-key-123456 may not use this model"}}`, true)},
			[]string{"anthropic-operator-key-123456"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := play(t, s, false, tt.msgs...)
			var client strings.Builder
			for i, r := range out[3:] {
				if bm := r.GetResponseBody().GetResponse().GetBodyMutation(); bm != nil {
					client.Write(bm.GetBody())
				} else {
					client.Write(tt.msgs[3+i].GetResponseBody().GetBody())
				}
			}
			got := client.String()
			for _, sec := range tt.secret {
				if strings.Contains(got, sec) {
					t.Errorf("the client got the credential: %s", got)
				}
			}
			if tt.name != "401 quoting the key" && !strings.Contains(got, redact.Redacted) { // a 401 is told as the gateway's failure
				t.Errorf("the client's error %s: want the credential's place marked", got)
			}
		})
	}
}
