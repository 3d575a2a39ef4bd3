package extproc

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz/ledger"
	"modelgate/envoy"
	"modelgate/envoy/routing"
	"modelgate/translate/api/spec"
)

// newFallbackServer serves "smart", a Fallback model on Anthropic first and
// OpenAI second, and "plain", a model without fallback on OpenAI.
func newFallbackServer(t *testing.T) (*Server, *usageLog, *Metrics) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	usage := &usageLog{}
	s, err := New(Config{Metrics: m,
		Routing: routing.Table{Backends: []routing.Backend{{Name: "anthropic", Provider: "anthropic"}, {Name: "openai", Provider: "openai"}},
			Models: []routing.Model{
				{ID: "smart", Fallback: &routing.Fallback{}, Deployments: []routing.Deployment{
					{Backend: "openai", Model: "gpt-up", Priority: 1},
					{Backend: "anthropic", Model: "claude-up", Priority: 0},
				}},
				{ID: "plain", Deployments: []routing.Deployment{{Backend: "openai", Model: "gpt-up"}}},
			}},
		Credentials: map[string]Credentials{"anthropic": {APIKey: "ant-key"}, "openai": {APIKey: "oai-key"}},
	}, stubAuth{}, usage)
	if err != nil {
		t.Fatal(err)
	}
	return s, usage, m
}

const smartChat = `{"model":"smart","messages":[{"role":"user","content":"hi"}]}`

// setHeaders is a mutation's set headers by name.
func setHeaders(m *extprocv3.HeaderMutation) map[string]string {
	out := map[string]string{}
	for _, h := range m.GetSetHeaders() {
		out[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	return out
}

// attemptMsg is the first message of an upstream stream: the shared
// request headers, the attributes Envoy evaluates for the attempt and the
// forwarded metadata (nil for none).
func attemptMsg(h map[string]string, backend string, count int, md map[string]any) *extprocv3.ProcessingRequest {
	var kv []string
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		kv = append(kv, k, h[k])
	}
	req := &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false, kv...)},
		Attributes: map[string]*structpb.Struct{extProcAttributes: {Fields: map[string]*structpb.Value{
			envoy.UpstreamAttributes("io.modelgate")[0]: structpb.NewStringValue(backend),
			attemptCountAttribute:                       structpb.NewNumberValue(float64(count)),
		}}},
	}
	if md != nil {
		st, err := structpb.NewStruct(md)
		if err != nil {
			panic(err)
		}
		req.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"io.modelgate": st}}
	}
	return req
}

// apply changes the shared header map as Envoy does: removals, then sets
// that overwrite; pseudo-headers are never removed.
func apply(h map[string]string, m *extprocv3.HeaderMutation) {
	for _, k := range m.GetRemoveHeaders() {
		if !strings.HasPrefix(k, ":") {
			delete(h, k)
		}
	}
	for k, v := range setHeaders(m) {
		h[k] = v
	}
}

// The router-level stream of a Fallback model passes the client's body on
// unchanged, sets the model's route headers but no routing header, drops
// the client's key and hands the upstream streams the request's context.
func TestFallbackRouterPassesBodyOn(t *testing.T) {
	s, _, _ := newFallbackServer(t)
	body := strings.Replace(smartChat, `{`, `{"stream":true,`, 1)
	out := play(t, s, false, reqHeaders("content-type", "application/json"), reqBody(body))
	br := out[1].GetRequestBody()
	if br == nil {
		t.Fatalf("reply %v, want a request body reply", out[1])
	}
	if br.GetResponse().GetBodyMutation() != nil {
		t.Errorf("body mutated: %v", br.GetResponse().GetBodyMutation())
	}
	mut := br.GetResponse().GetHeaderMutation()
	set := setHeaders(mut)
	if _, ok := set["x-modelgate-backend"]; ok {
		t.Errorf("routing header set: %v", set)
	}
	if set[routing.ModelHeader] != "smart" || set[routing.StreamHeader] != "1" || set["authorization"] != "" || set[":path"] != "" {
		t.Errorf("set headers %v", set)
	}
	if !slices.Contains(mut.GetRemoveHeaders(), "authorization") || !br.GetResponse().GetClearRouteCache() {
		t.Errorf("the client's key stays (removed %v) or the route cache is kept", mut.GetRemoveHeaders())
	}
	ctx := out[1].GetDynamicMetadata().GetFields()["io.modelgate"].GetStructValue().AsMap()
	if ctx[contextPath] != "/v1/chat/completions" || ctx[contextContentType] != "application/json" || ctx[contextAccount] != "a" ||
		ctx[contextClientID] != "r1" {
		t.Errorf("request context %v", ctx)
	}
}

// The upstream stream of an attempt on the Anthropic deployment turns the
// client's OpenAI chat request into a Messages API request, with
// Anthropic's credential and version, and names the deployment on the
// answer and nothing else.
func TestAttemptTranslatesForAnthropic(t *testing.T) {
	s, usage, _ := newFallbackServer(t)
	shared := map[string]string{":method": "POST", ":path": "/v1/chat/completions", ":authority": "gw", "content-type": "application/json",
		"authorization": "Bearer sk-client", "x-request-id": "r1", "content-length": "58"}
	out := play(t, s, false, attemptMsg(shared, "anthropic", 1, nil), reqBody(smartChat),
		respHeaders(false, ":status", "200", "content-type", "application/json", attemptReplyHeader, "spoofed"))
	if out[0].GetRequestHeaders() == nil {
		t.Fatalf("headers answered %v", out[0])
	}
	common := out[1].GetRequestBody().GetResponse()
	set := setHeaders(common.GetHeaderMutation())
	upBody := common.GetBodyMutation().GetBody()
	if set[":path"] != "/v1/messages" || set["x-api-key"] != "ant-key" || set["anthropic-version"] == "" ||
		set["content-length"] != strconv.Itoa(len(upBody)) || set["accept-encoding"] != "identity" {
		t.Errorf("set headers %v", set)
	}
	if !slices.Contains(common.GetHeaderMutation().GetRemoveHeaders(), "authorization") {
		t.Errorf("the client's key is not removed: %v", common.GetHeaderMutation().GetRemoveHeaders())
	}
	var msg struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct{ Type, Text string }
		} `json:"messages"`
	}
	if err := json.Unmarshal(upBody, &msg); err != nil || msg.Model != "claude-up" || msg.MaxTokens == 0 ||
		len(msg.Messages) != 1 || msg.Messages[0].Content[0].Text != "hi" {
		t.Errorf("upstream body %s (%v)", upBody, err)
	}
	rh := out[2].GetResponseHeaders().GetResponse().GetHeaderMutation()
	if got := setHeaders(rh); len(got) != 1 || got[deploymentHeader] != "anthropic" {
		t.Errorf("response headers set %v, want only %s", got, deploymentHeader)
	}
	if !slices.Contains(rh.GetRemoveHeaders(), attemptReplyHeader) {
		t.Errorf("a provider's %s passes: %v", attemptReplyHeader, rh.GetRemoveHeaders())
	}
	if len(usage.recs) != 0 {
		t.Errorf("an attempt recorded usage: %+v", usage.recs)
	}
}

// A second attempt, on the OpenAI deployment, starts from the header map
// the first attempt changed: Anthropic's credential and version go,
// OpenAI's authorization and path come, and the body is translated afresh
// from the client's. Attempts are counted, retries apart.
func TestSecondAttemptOnSharedHeaders(t *testing.T) {
	s, _, m := newFallbackServer(t)
	shared := map[string]string{":method": "POST", ":path": "/v1/chat/completions", ":authority": "gw", "content-type": "application/json",
		"x-request-id": "r1", "content-length": "58"}
	md := map[string]any{contextPath: "/v1/chat/completions", contextContentType: "application/json", contextAccount: "a"}
	first := play(t, s, false, attemptMsg(shared, "anthropic", 1, md), reqBody(smartChat))
	apply(shared, first[1].GetRequestBody().GetResponse().GetHeaderMutation())
	if shared["x-api-key"] != "ant-key" || shared[":path"] != "/v1/messages" {
		t.Fatalf("after the first attempt: %v", shared)
	}
	second := play(t, s, false, attemptMsg(shared, "openai", 2, md), reqBody(smartChat),
		respHeaders(false, ":status", "200", "content-type", "application/json"))
	common := second[1].GetRequestBody().GetResponse()
	removed := common.GetHeaderMutation().GetRemoveHeaders()
	for _, h := range []string{"x-api-key", "anthropic-version"} {
		if !slices.Contains(removed, h) {
			t.Errorf("%s not removed (removed %v)", h, removed)
		}
	}
	apply(shared, common.GetHeaderMutation())
	if shared["authorization"] != "Bearer oai-key" || shared[":path"] != "/v1/chat/completions" ||
		shared["x-api-key"] != "" || shared["anthropic-version"] != "" || shared["content-type"] != "application/json" {
		t.Errorf("headers the second attempt sends: %v", shared)
	}
	if b := string(common.GetBodyMutation().GetBody()); !strings.Contains(b, `"model":"gpt-up"`) || !strings.Contains(b, `"content":"hi"`) {
		t.Errorf("second attempt's body %s", b)
	}
	if got := setHeaders(second[2].GetResponseHeaders().GetResponse().GetHeaderMutation())[deploymentHeader]; got != "openai" {
		t.Errorf("deployment header %q", got)
	}
	if n := counterValue(t, m.attempts, "smart", "anthropic") + counterValue(t, m.attempts, "smart", "openai"); n != 2 {
		t.Errorf("%v attempts counted, want 2", n)
	}
	if n := counterValue(t, m.retries, "smart", "openai"); n != 1 || counterValue(t, m.retries, "smart", "anthropic") != 0 {
		t.Errorf("%v retries counted on openai, want 1", n)
	}

	// Without the forwarded context a later attempt cannot know the
	// client's endpoint: an OpenAI error, marked as the gateway's own.
	out := play(t, s, false, attemptMsg(map[string]string{":method": "POST", ":path": "/v1/messages", "content-type": "application/json"},
		"openai", 2, nil), reqBody(smartChat))
	ir := out[1].GetImmediateResponse()
	if ir.GetStatus().GetCode() != 500 || setHeaders(ir.GetHeaders())[attemptReplyHeader] == "" {
		t.Fatalf("reply %v, want a marked 500", out[1])
	}
	spec.ValidateT(t, "ErrorResponse", ir.GetBody())
}

// The router-level stream translates the answer of the deployment the
// answer names, JSON and SSE, and records its usage for that backend.
func TestFallbackAnswerFromAnthropic(t *testing.T) {
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"Hello!"}],` +
		`"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":5}}`
	t.Run("json", func(t *testing.T) {
		s, usage, _ := newFallbackServer(t)
		out := play(t, s, false, reqHeaders(), reqBody(smartChat),
			respHeaders(false, ":status", "200", "content-type", "application/json", "content-length", strconv.Itoa(len(answer)), deploymentHeader, "anthropic"),
			respBody(answer, true))
		body := out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
		spec.ValidateT(t, "CreateChatCompletionResponse", body)
		if !strings.Contains(string(body), `"content":"Hello!"`) {
			t.Errorf("body %s", body)
		}
		rec := usage.only(t)
		if rec.Backend != "anthropic" || rec.Model != "smart" || rec.Status != 200 || rec.PromptTokens != 12 || rec.CompletionTokens != 5 || rec.Estimated {
			t.Errorf("record %+v", rec)
		}
		if md := out[3].GetDynamicMetadata().GetFields()["io.modelgate"].GetStructValue().AsMap(); md["backend"] != "anthropic" || md["provider"] != "anthropic" {
			t.Errorf("metadata %v", md)
		}
	})
	t.Run("json response format", func(t *testing.T) {
		// The translator learns from the request that a JSON answer comes
		// as a tool call: the router-level stream translates the request
		// too before the answer.
		s, _, _ := newFallbackServer(t)
		req := strings.Replace(smartChat, `{`, `{"response_format":{"type":"json_object"},`, 1)
		tool := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[{"type":"tool_use","id":"t","name":"json_response","input":{"city":"Paris"}}],` +
			`"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}`
		out := play(t, s, false, reqHeaders(), reqBody(req),
			respHeaders(false, ":status", "200", "content-type", "application/json", deploymentHeader, "anthropic"), respBody(tool, true))
		body := out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
		spec.ValidateT(t, "CreateChatCompletionResponse", body)
		if !strings.Contains(string(body), `"content":"{\"city\":\"Paris\"}"`) || strings.Contains(string(body), "tool_calls") {
			t.Errorf("body %s", body)
		}
	})
	t.Run("sse", func(t *testing.T) {
		s, usage, _ := newFallbackServer(t)
		events := []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","model":"claude-up","usage":{"input_tokens":12,"output_tokens":1}}}` + "\n\n",
			`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n",
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\n",
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo!"}}` + "\n\n",
			`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n",
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}` + "\n\n",
			`event: message_stop` + "\n" + `data: {"type":"message_stop"}` + "\n\n",
		}
		stream := strings.Replace(smartChat, `{`, `{"stream":true,"stream_options":{"include_usage":true},`, 1)
		msgs := []*extprocv3.ProcessingRequest{reqHeaders(), reqBody(stream),
			respHeaders(false, ":status", "200", "content-type", "text/event-stream", deploymentHeader, "anthropic")}
		for _, ev := range events {
			msgs = append(msgs, respBody(ev, false))
		}
		msgs = append(msgs, respBody("", true))
		out := play(t, s, false, msgs...)
		if out[1].GetRequestBody().GetResponse().GetHeaderMutation() == nil || setHeaders(out[1].GetRequestBody().GetResponse().GetHeaderMutation())[routing.StreamHeader] != "1" {
			t.Errorf("stream header not set: %v", out[1])
		}
		head := out[2].GetResponseHeaders()
		if head == nil || out[2].GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
			t.Fatalf("head %v: want STREAMED", out[2])
		}
		var client []byte
		for _, r := range out[3:] {
			client = append(client, r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()...)
		}
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", client)
		if !strings.Contains(string(client), `"content":"Hel"`) || !strings.HasSuffix(string(client), "data: [DONE]\n\n") {
			t.Errorf("stream %s", client)
		}
		if rec := usage.only(t); rec.Backend != "anthropic" || rec.PromptTokens != 12 || rec.CompletionTokens != 5 || rec.Status != 200 {
			t.Errorf("record %+v", rec)
		}
	})
}

// Without x-modelgate-deployment the answer is one of Envoy's own (every
// deployment failed): the client gets the fault path's OpenAI error and
// the ledger the request, charged nothing and naming no backend. An
// upstream stream's own error passes as it came.
func TestFallbackAnswerWithoutDeployment(t *testing.T) {
	for name, tc := range map[string]struct {
		head []string
		want string
	}{
		"unmarked": {[]string{":status", "503", "content-type", "text/plain"}, "could not complete"},
		"marked":   {[]string{":status", "503", "content-type", "application/json", routing.LocalReplyHeader, "no_healthy_upstream"}, "could not be reached"},
	} {
		t.Run(name, func(t *testing.T) {
			s, usage, _ := newFallbackServer(t)
			out := play(t, s, false, reqHeaders(), reqBody(smartChat), respHeaders(false, tc.head...), respBody("no healthy upstream", true))
			if out[2].GetResponseHeaders() == nil {
				t.Fatalf("head answered %v", out[2])
			}
			body := out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
			spec.ValidateT(t, "ErrorResponse", body)
			if !strings.Contains(string(body), tc.want) {
				t.Errorf("body %s", body)
			}
			if rec := usage.only(t); rec.Status != 503 || rec.Backend != "" || rec.TotalTokens != 0 {
				t.Errorf("record %+v", rec)
			}
		})
	}
	t.Run("an attempt's own error", func(t *testing.T) {
		s, usage, _ := newFallbackServer(t)
		errBody := string(openAIDialect.errorBody(errEndpointNotSupported("smart", endpointChat)))
		out := play(t, s, false, reqHeaders(), reqBody(smartChat),
			respHeaders(false, ":status", "400", "content-type", "application/json", attemptReplyHeader, "modelgate_400"), respBody(errBody, true))
		if rm := out[2].GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); !slices.Contains(rm, attemptReplyHeader) {
			t.Errorf("mark kept: %v", rm)
		}
		if b := out[3].GetResponseBody().GetResponse(); b.GetBodyMutation() != nil {
			t.Errorf("body changed: %v", b)
		}
		if rec := usage.only(t); rec.Status != 400 {
			t.Errorf("record %+v", rec)
		}
	})
}

// A Fallback model serves an endpoint only if every deployment does: an
// attempt that cannot is a final error, never a fallback.
func TestFallbackEndpointMustBeServedByEveryDeployment(t *testing.T) {
	s, usage, _ := newFallbackServer(t)
	msgs := []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false, ":method", "POST", ":path", "/v1/embeddings",
			"authorization", "Bearer sk-client", "x-request-id", "r2")}},
		reqBody(`{"model":"smart","input":"x"}`),
	}
	out := play(t, s, false, msgs...)
	ir := out[1].GetImmediateResponse()
	if ir.GetStatus().GetCode() != 400 || !strings.Contains(string(ir.GetBody()), "does not support embeddings") {
		t.Fatalf("reply %v", out[1])
	}
	spec.ValidateT(t, "ErrorResponse", ir.GetBody())
	if len(usage.recs) != 0 {
		t.Errorf("records %+v", usage.recs)
	}
}

// Models without Fallback keep the server's own pick: translated body,
// routing header, no context metadata, even on a server with fallbacks.
func TestNonFallbackModelUnchanged(t *testing.T) {
	s, usage, _ := newFallbackServer(t)
	out := play(t, s, false, reqHeaders(), reqBody(`{"model":"plain","messages":[{"role":"user","content":"hi"}]}`),
		respHeaders(false, ":status", "200", "content-type", "application/json"),
		respBody(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, true))
	common := out[1].GetRequestBody().GetResponse()
	set := setHeaders(common.GetHeaderMutation())
	if set["x-modelgate-backend"] != "openai" || set["authorization"] != "Bearer oai-key" || common.GetBodyMutation() == nil ||
		out[1].GetDynamicMetadata() != nil {
		t.Errorf("request reply %v", out[1])
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody())
	if rec := usage.only(t); rec.Backend != "openai" || rec.TotalTokens != 2 {
		t.Errorf("record %+v", rec)
	}
}

// An upstream stream is known by the attribute naming its backend, which
// is what the generated bootstrap asks Envoy for; a router-level stream
// has none.
func TestUpstreamAttemptAttributes(t *testing.T) {
	s, _, _ := newFallbackServer(t)
	names := envoy.UpstreamAttributes("io.modelgate")
	req := &extprocv3.ProcessingRequest{Attributes: map[string]*structpb.Struct{extProcAttributes: {Fields: map[string]*structpb.Value{
		names[0]: structpb.NewStringValue("anthropic"), names[1]: structpb.NewNumberValue(3)}}}}
	if a := s.upstreamAttempt(req); a == nil || a.err != nil || a.backend != "anthropic" || a.count != 3 {
		t.Errorf("attempt %+v", a)
	}
	if a := s.upstreamAttempt(&extprocv3.ProcessingRequest{}); a != nil {
		t.Errorf("a router-level stream taken for an attempt: %+v", a)
	}
	empty := &extprocv3.ProcessingRequest{Attributes: map[string]*structpb.Struct{extProcAttributes: {Fields: map[string]*structpb.Value{
		names[0]: structpb.NewStringValue("")}}}}
	if a := s.upstreamAttempt(empty); a == nil || a.err == nil {
		t.Errorf("metadata without a backend: %+v", a)
	}
	if envoy.BackendMetadataKey != backendMetadataKey || names[1] != attemptCountAttribute {
		t.Error("the attributes the bootstrap asks for and the server reads differ")
	}
}

// Every credential and version header a provider's translator sets is
// removed by an attempt that does not set it.
func TestAttemptHeaderNames(t *testing.T) {
	names := attemptHeaderNames()
	for _, h := range []string{"authorization", "x-api-key", "anthropic-version", "api-key", "x-goog-api-key", "x-amz-date", "x-amz-security-token"} {
		if !slices.Contains(names, h) {
			t.Errorf("%s missing from %v", h, names)
		}
	}
	if slices.Contains(names, "content-type") {
		t.Errorf("content-type removed: %v", names)
	}
}

// A fallback model may name a backend once only: an attempt names its
// deployment by backend.
func TestFallbackModelBackendTwice(t *testing.T) {
	_, err := New(Config{Routing: routing.Table{Backends: []routing.Backend{{Name: "b", Provider: "openai"}},
		Models: []routing.Model{{ID: "m", Fallback: &routing.Fallback{}, Deployments: []routing.Deployment{{Backend: "b", Model: "x"}, {Backend: "b", Model: "y"}}}}}},
		stubAuth{}, &usageLog{})
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("err = %v", err)
	}
}

func counterValue(t *testing.T, c *prometheus.CounterVec, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.WithLabelValues(labels...).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The Responses API goes the same way: an attempt on Anthropic bridges it
// onto the Messages API, and the router-level stream turns Anthropic's
// answer into a Response.
func TestFallbackResponsesBridged(t *testing.T) {
	s, usage, _ := newFallbackServer(t)
	const req = `{"model":"smart","input":"hi"}`
	shared := map[string]string{":method": "POST", ":path": "/v1/responses", "content-type": "application/json"}
	md := map[string]any{contextPath: "/v1/responses", contextContentType: "application/json", contextAccount: "a"}
	up := play(t, s, false, attemptMsg(shared, "anthropic", 1, md), reqBody(req), respHeaders(false, ":status", "200"))
	common := up[1].GetRequestBody().GetResponse()
	if p := setHeaders(common.GetHeaderMutation())[":path"]; p != "/v1/messages" || !strings.Contains(string(common.GetBodyMutation().GetBody()), `"claude-up"`) {
		t.Fatalf("attempt %s %s", p, common.GetBodyMutation().GetBody())
	}
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"Hello!"}],` +
		`"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":5}}`
	out := play(t, s, false,
		&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false, ":method", "POST",
			":path", "/v1/responses", "authorization", "Bearer sk-client", "x-request-id", "r3")}},
		reqBody(req), respHeaders(false, ":status", "200", "content-type", "application/json", deploymentHeader, "anthropic"), respBody(answer, true))
	body := out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
	spec.ValidateT(t, "Response", body)
	if !strings.Contains(string(body), "Hello!") {
		t.Errorf("body %s", body)
	}
	if rec := usage.only(t); rec.Backend != "anthropic" || rec.Endpoint != "responses" || rec.TotalTokens != 17 {
		t.Errorf("record %+v", rec)
	}
}

// A failed attempt is in the ledger: its backend and status, or status 0
// when it got no answer, and no tokens; the request's own record stays the
// router-level stream's.
func TestFallbackAttemptRecords(t *testing.T) {
	s, usage, _ := newFallbackServer(t)
	const req = `{"model":"smart","messages":[{"role":"user","content":"hi"}]}`
	shared := map[string]string{":method": "POST", ":path": "/v1/chat/completions", "content-type": "application/json", "x-request-id": "r9"}
	md := map[string]any{contextPath: "/v1/chat/completions", contextContentType: "application/json", contextAccount: "a",
		contextClientID: "the-client's"}
	play(t, s, false, attemptMsg(shared, "anthropic", 1, md), reqBody(req), respHeaders(false, ":status", "503"))
	play(t, s, false, attemptMsg(shared, "openai", 2, md), reqBody(req)) // reset before it answered
	play(t, s, false, attemptMsg(shared, "openai", 3, md), reqBody(req), respHeaders(false, ":status", "200"))
	usage.mu.Lock()
	recs := slices.Clone(usage.recs)
	usage.mu.Unlock()
	if len(recs) != 2 {
		t.Fatalf("%d records, want the two failed attempts: %+v", len(recs), recs)
	}
	for i, want := range []ledger.UsageRecord{{RequestID: "r9", ClientRequestID: "the-client's", AccountID: "a", Endpoint: "chat.completions", Model: "smart", Backend: "anthropic", Status: 503, Attempt: 1},
		{RequestID: "r9", ClientRequestID: "the-client's", AccountID: "a", Endpoint: "chat.completions", Model: "smart", Backend: "openai", Status: 0, Attempt: 2}} {
		got := recs[i]
		got.Duration, got.At = 0, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("record %d: %+v, want %+v", i, got, want)
		}
	}
}
