package extproc

import (
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"modelgate/envoy/routing"
	"modelgate/translate"
)

// permitsServer serves a model on each provider of the Messages API and
// one on OpenAI, none of them with web search.
func permitsServer(t *testing.T) *Server {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Metrics: m, Routing: routing.Table{
		Backends: []routing.Backend{{Name: "anthropic", Provider: "anthropic"}, {Name: "openai", Provider: "openai"},
			{Name: "vertex", Provider: "vertex", Region: "us-east5", Project: "p"},
			{Name: "bedrock", Provider: "bedrock", Region: "us-east-1", BaseURL: "https://bedrock-runtime.us-east-1.amazonaws.com"}},
		Models: []routing.Model{
			{ID: "claude", Deployments: []routing.Deployment{{Backend: "anthropic", Model: "claude-sonnet-4-5"}}},
			{ID: "vertex-claude", Deployments: []routing.Deployment{{Backend: "vertex", Model: "claude-sonnet-4-5@20250929"}}},
			{ID: "bedrock-claude", Deployments: []routing.Deployment{{Backend: "bedrock", Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}}},
			{ID: "gpt", Deployments: []routing.Deployment{{Backend: "openai", Model: "gpt-5"}}},
		}},
		Credentials: map[string]Credentials{"anthropic": {APIKey: "k"}, "openai": {APIKey: "k"}, "vertex": {APIKey: "token"},
			"bedrock": {AWS: translate.AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}}},
	}, stubAuth{}, &usageLog{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The providers' own headers a client could send to choose on the
// operator's account: a service tier, latency, a guardrail, temporary
// credentials, a Google project to bill, an Anthropic beta.
var providerHeaders = []string{"x-amzn-bedrock-service-tier", "priority", "x-amzn-bedrock-performanceconfig-latency", "optimized",
	"x-amzn-bedrock-guardrailidentifier", "gr-1", "x-amz-security-token", "FwoGZXIvYXdzEBY", "x-goog-user-project", "other-project",
	"openai-beta", "assistants=v2", "anthropic-dangerous-direct-browser-access", "true"}

// On a model without web search, no server tool, MCP server or premium
// tier reaches a provider through any front door: the Messages API as
// relayed to Anthropic, Claude on Vertex AI and Claude on Bedrock, chat
// and the Responses API to OpenAI. What was left out is named in the
// answer's warning header, and no provider header of the client's
// reaches a provider.
func TestNothingUnpermittedReachesAProvider(t *testing.T) {
	const messagesBody = `{"model":"%s","max_tokens":100,"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"code_execution_20250825","name":"code_execution"},{"name":"Bash","input_schema":{"type":"object"}}],` +
		`"mcp_servers":[{"type":"url","url":"https://evil.example/mcp","name":"evil"}],"container":"cntr_1","service_tier":"auto","speed":"fast"}`
	messages := []string{":method", "POST", ":path", "/v1/messages", "x-api-key", "sk-client", "anthropic-version", "2023-06-01",
		"anthropic-beta", "context-1m-2025-08-07,interleaved-thinking-2025-05-14", "content-type", "application/json"}
	bearer := []string{":method", "POST", "authorization", "Bearer sk-client", "content-type", "application/json"}
	for _, tt := range []struct {
		name, body string
		headers    []string
		forbidden  []string // in the upstream body
		left       []string // in the warning
	}{
		{"messages on Anthropic", strings.Replace(messagesBody, "%s", "claude", 1), messages,
			[]string{"web_search", "code_execution", "evil.example", "cntr_1", `"fast"`, "context-1m"},
			[]string{"tool web_search_20250305", "tool code_execution_20250825", "mcp_servers", "container", "speed", "beta context-1m-2025-08-07"}},
		{"messages on Vertex AI", strings.Replace(messagesBody, "%s", "vertex-claude", 1), messages,
			[]string{"web_search", "code_execution", "evil.example", "cntr_1", `"fast"`, "context-1m"},
			[]string{"tool web_search_20250305", "mcp_servers"}},
		{"messages on Bedrock", strings.Replace(messagesBody, "%s", "bedrock-claude", 1), messages,
			[]string{"web_search", "code_execution", "evil.example", "cntr_1", `"fast"`, "context-1m"},
			[]string{"tool web_search_20250305", "mcp_servers"}},
		{"chat on OpenAI", `{"model":"gpt","messages":[{"role":"user","content":"hi"}],"web_search_options":{},"service_tier":"priority"}`,
			append(bearer, ":path", "/v1/chat/completions"), []string{"web_search_options", "priority"},
			[]string{"web_search_options", `service_tier "priority"`}},
		{"responses on OpenAI", `{"model":"gpt","input":"hi","service_tier":"priority","tools":[{"type":"web_search"},{"type":"mcp","server_label":"evil","server_url":"https://evil.example/mcp"},{"type":"file_search","vector_store_ids":["vs_1"]}]}`,
			append(bearer, ":path", "/v1/responses"), []string{"web_search", "evil.example", "vs_1", "priority"},
			[]string{"tool web_search", "tool mcp", "tool file_search", `service_tier "priority"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := permitsServer(t)
			h := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
				RequestHeaders: hdrs(false, append(slices.Clone(tt.headers), providerHeaders...)...)}}
			out := play(t, s, false, h, reqBody(tt.body), respHeaders(false, ":status", "200", "content-type", "application/json"))
			removed := out[0].GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders()
			for i := 0; i < len(providerHeaders); i += 2 {
				if !slices.Contains(removed, providerHeaders[i]) {
					t.Errorf("the client's %s is not removed (removed: %q)", providerHeaders[i], removed)
				}
			}
			body := out[1].GetRequestBody().GetResponse()
			up := string(body.GetBodyMutation().GetBody())
			if up == "" {
				t.Fatalf("nothing went upstream: %v", out[1])
			}
			for _, f := range tt.forbidden {
				if strings.Contains(up, f) {
					t.Errorf("the provider got %q: %s", f, up)
				}
			}
			setsBeta := false
			for _, set := range body.GetHeaderMutation().GetSetHeaders() {
				if v := string(set.GetHeader().GetRawValue()); strings.Contains(v, "context-1m") {
					t.Errorf("the provider got %s: %s", set.GetHeader().GetKey(), v)
				}
				setsBeta = setsBeta || set.GetHeader().GetKey() == "anthropic-beta"
			}
			// The client's own anthropic-beta (with the 1M-context beta)
			// must not reach the provider: removed, or replaced.
			if slices.Contains(tt.headers, "anthropic-beta") && !setsBeta && !slices.Contains(removed, "anthropic-beta") &&
				!slices.Contains(body.GetHeaderMutation().GetRemoveHeaders(), "anthropic-beta") {
				t.Errorf("the client's anthropic-beta is neither replaced nor removed")
			}
			var warning string
			for _, set := range out[2].GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
				if set.GetHeader().GetKey() == translate.WarningHeader {
					warning = string(set.GetHeader().GetRawValue())
				}
			}
			for _, l := range tt.left {
				if !strings.Contains(warning, l) {
					t.Errorf("warning %q does not name %q", warning, l)
				}
			}
		})
	}
}

// An answer names what served it in the gateway's headers, and OpenAI's
// openai-model header, where the provider sent one, names the model the
// client asked for, as the body does.
func TestAnswerModelHeaders(t *testing.T) {
	s := permitsServer(t)
	h := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: hdrs(false, ":method", "POST", ":path", "/v1/chat/completions", "authorization", "Bearer k", "content-type", "application/json")}}
	out := play(t, s, false, h, reqBody(`{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`),
		respHeaders(false, ":status", "200", "content-type", "application/json", "openai-model", "gpt-5-2026-01-01"))
	set := map[string]string{}
	for _, hv := range out[2].GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		set[hv.GetHeader().GetKey()] = string(hv.GetHeader().GetRawValue())
	}
	if set["x-modelgate-resolved-model"] != "gpt" || set["x-modelgate-provider-model"] != "gpt-5" || set["openai-model"] != "gpt" {
		t.Errorf("answer headers %v", set)
	}
}
