package extproc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/envoy"
	"modelgate/envoy/routing"
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/providers"
	"modelgate/translate/responses"
)

// fakeStream plays Envoy's messages to Process and keeps its replies.
// Recv ends with io.EOF after the last message, or with the context's
// error when cancel is set (Envoy resetting the stream).
type fakeStream struct {
	ctx    context.Context
	in     []*extprocv3.ProcessingRequest
	out    []*extprocv3.ProcessingResponse
	cancel bool
}

func (f *fakeStream) Recv() (*extprocv3.ProcessingRequest, error) {
	if len(f.in) == 0 {
		if f.cancel {
			return nil, context.Canceled
		}
		return nil, io.EOF
	}
	m := f.in[0]
	f.in = f.in[1:]
	return m, nil
}

// Send keeps a copy, as gRPC encodes the reply before Send returns: the
// server may reuse it for its next reply.
func (f *fakeStream) Send(r *extprocv3.ProcessingResponse) error {
	f.out = append(f.out, proto.Clone(r).(*extprocv3.ProcessingResponse))
	return nil
}
func (f *fakeStream) Context() context.Context     { return f.ctx }
func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SetTrailer(metadata.MD)       {}
func (f *fakeStream) SendMsg(any) error            { return nil }
func (f *fakeStream) RecvMsg(any) error            { return nil }

type stubAuth struct{}

func (stubAuth) Authenticate(context.Context, string) (*authz.Principal, error) {
	return &authz.Principal{KeyID: "k", AccountID: "a"}, nil
}

type usageLog struct {
	mu   sync.Mutex
	recs []ledger.UsageRecord
}

func (u *usageLog) AppendUsage(_ context.Context, r ledger.UsageRecord) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.recs = append(u.recs, r)
	return nil
}

func (u *usageLog) only(t *testing.T) ledger.UsageRecord {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.recs) != 1 {
		t.Fatalf("%d usage records, want 1: %+v", len(u.recs), u.recs)
	}
	return u.recs[0]
}

// panicky panics on an upstream chunk holding PANIC, as a translator with
// a bug would on a provider's bad bytes.
type panicky struct{ translate.Translator }

func (p panicky) ResponseBody(chunk []byte, eos bool) ([]byte, error) {
	if bytes.Contains(chunk, []byte("PANIC")) {
		panic("a translator bug")
	}
	return p.Translator.ResponseBody(chunk, eos)
}

func newFaultServer(t *testing.T) (*Server, *usageLog, *Metrics) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	usage := &usageLog{}
	s, err := New(Config{Metrics: m,
		Routing: routing.Table{Backends: []routing.Backend{{Name: "b", Provider: "openai", Timeouts: routing.Timeouts{ResponseHeaders: time.Minute, StreamIdle: 10 * time.Second}}},
			Models: []routing.Model{{ID: "gpt-x", Deployments: []routing.Deployment{{Backend: "b", Model: "up"}}}}},
		Credentials: map[string]Credentials{"b": {APIKey: "provider-key"}},
	}, stubAuth{}, usage)
	if err != nil {
		t.Fatal(err)
	}
	p := s.providers["openai"]
	chat := p.Chat
	p.Chat = func(tg translate.Target, r *api.ChatRequest) translate.Translator { return panicky{chat(tg, r)} }
	s.providers["openai"] = p
	return s, usage, m
}

func hdrs(eos bool, kv ...string) *extprocv3.HttpHeaders {
	var hs []*corev3.HeaderValue
	for i := 0; i < len(kv); i += 2 {
		hs = append(hs, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}, EndOfStream: eos}
}

func reqHeaders(kv ...string) *extprocv3.ProcessingRequest {
	base := []string{":method", "POST", ":path", "/v1/chat/completions", "authorization", "Bearer sk-client", "x-request-id", "r1"}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false, append(base, kv...)...)}}
}

func reqBody(body string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}}
}

func respHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: hdrs(eos, kv...)}}
}

func respBody(body string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: eos}}}
}

func play(t *testing.T, s *Server, cancel bool, msgs ...*extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
	t.Helper()
	f := &fakeStream{ctx: context.Background(), in: msgs, cancel: cancel}
	if err := s.Process(f); err != nil {
		t.Fatalf("Process: %v (replies %v)", err, f.out)
	}
	if len(f.out) != len(msgs) {
		t.Fatalf("%d replies to %d messages", len(f.out), len(msgs))
	}
	return f.out
}

const streamChat = `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}],"stream":true}`

func chunk(content string) string {
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"` +
		content + `"},"finish_reason":null}]}` + "\n\n"
}

// A panic mid-stream ends that stream with one error event and drops the
// rest; it is logged, counted and recorded as a 500, and the process
// lives on to serve the next stream.
func TestPanicMidStreamFailsOneRequest(t *testing.T) {
	s, usage, m := newFaultServer(t)
	out := play(t, s, false, reqHeaders(), reqBody(streamChat),
		respHeaders(false, ":status", "200", "content-type", "text/event-stream"),
		respBody(chunk("Hello"), false), respBody(chunk("PANIC"), false), respBody(chunk("more"), false), respBody("", true))
	if got := string(out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()); !strings.Contains(got, "Hello") {
		t.Errorf("first chunk %q", got)
	}
	ev := string(out[4].GetResponseBody().GetResponse().GetBodyMutation().GetBody())
	data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
	if !ok {
		t.Fatalf("panicking chunk answered %q, want one error event", ev)
	}
	spec.ValidateT(t, "ErrorResponse", []byte(data))
	for _, r := range out[5:] {
		if b := r.GetResponseBody().GetResponse().GetBodyMutation(); b == nil || len(b.GetBody()) != 0 {
			t.Errorf("a chunk after the panic was answered %v, want dropped", b)
		}
	}
	if rec := usage.only(t); rec.Status != 500 || rec.TotalTokens == 0 || !rec.Estimated {
		t.Errorf("record %+v: want status 500 with estimated tokens", rec)
	}
	var pm dto.Metric
	if err := m.panics.Write(&pm); err != nil || pm.GetCounter().GetValue() != 1 {
		n := pm.GetCounter().GetValue()
		t.Errorf("panics counted %v, want 1", n)
	}
	// The same server serves the next request.
	usage.recs = nil
	play(t, s, false, reqHeaders(), reqBody(streamChat), respHeaders(false, ":status", "200", "content-type", "text/event-stream"),
		respBody(chunk("Hi")+"data: [DONE]\n\n", true))
	if rec := usage.only(t); rec.Status != 200 {
		t.Errorf("next request recorded %+v", rec)
	}
}

// A panic while the answer is still held (a buffered body) becomes the
// OpenAI 500 as an immediate response.
func TestPanicInBufferedBody(t *testing.T) {
	s, usage, _ := newFaultServer(t)
	out := play(t, s, false, reqHeaders(), reqBody(`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`),
		respHeaders(false, ":status", "200", "content-type", "application/json", "content-length", "7"), respBody(`"PANIC"`, true))
	ir := out[3].GetImmediateResponse()
	if ir.GetStatus().GetCode() != 500 {
		t.Fatalf("reply %v, want an immediate 500", out[3])
	}
	spec.ValidateT(t, "ErrorResponse", ir.GetBody())
	if rec := usage.only(t); rec.Status != 500 {
		t.Errorf("record %+v", rec)
	}
}

// Envoy's own replies carry the bootstrap's mark: the server answers their
// headers and body with an OpenAI error naming the model, and records what
// the provider may have consumed.
func TestEnvoyLocalReplies(t *testing.T) {
	if errTooLarge().Message != envoy.TooLargeMessage || errInternal(nil).Message != envoy.InternalMessage {
		t.Fatal("the messages of Envoy's own 413 and 500 differ from the server's for the same errors")
	}
	t.Run("per-try timeout after routing", func(t *testing.T) {
		s, usage, _ := newFaultServer(t)
		out := play(t, s, false, reqHeaders(), reqBody(`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`),
			respHeaders(false, ":status", "504", "content-type", "application/json", routing.LocalReplyHeader, "upstream_per_try_timeout"),
			respBody(`{"error":{"message":"The model's provider did not answer in time."}}`, true))
		mut := out[2].GetResponseHeaders().GetResponse().GetHeaderMutation()
		if !strings.Contains(strings.Join(mut.GetRemoveHeaders(), ","), routing.LocalReplyHeader) {
			t.Errorf("header reply %v does not remove the mark", mut)
		}
		body := out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
		spec.ValidateT(t, "ErrorResponse", body)
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		json.Unmarshal(body, &e) //nolint:errcheck // validated
		if e.Error.Type != "server_error" || e.Error.Code != "timeout" || !strings.Contains(e.Error.Message, "`gpt-x`") ||
			!strings.Contains(e.Error.Message, "1m0s") {
			t.Errorf("body %s: want a timeout naming the model and its timeout", body)
		}
		if rec := usage.only(t); rec.Status != 504 || !rec.Estimated || rec.PromptTokens == 0 {
			t.Errorf("record %+v: want 504 with the estimated prompt", rec)
		}
	})
	t.Run("413 before the body", func(t *testing.T) {
		s, usage, _ := newFaultServer(t)
		out := play(t, s, false, reqHeaders(),
			respHeaders(false, ":status", "413", "content-type", "application/json", routing.LocalReplyHeader, "request_payload_too_large"),
			respBody(`{}`, true))
		body := out[2].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
		spec.ValidateT(t, "ErrorResponse", body)
		if !bytes.Contains(body, []byte("request_too_large")) {
			t.Errorf("body %s", body)
		}
		if len(usage.recs) != 0 {
			t.Errorf("records %+v for a request never routed", usage.recs)
		}
	})
	t.Run("unmarked reply body after the exchange settled", func(t *testing.T) {
		s, _, _ := newFaultServer(t)
		out := play(t, s, false, reqHeaders(), respHeaders(false, ":status", "413"), respBody("Payload Too Large", true))
		if out[2].GetResponseBody() == nil {
			t.Errorf("body answered %v, want a body reply", out[2])
		}
	})
}

// A stream that ends before its usage (Envoy resets the ext_proc stream:
// the client left, or the provider broke off) is recorded as 499 with
// estimated tokens for the prompt and the text streamed so far.
func TestBrokenStreamChargesAnEstimate(t *testing.T) {
	s, usage, _ := newFaultServer(t)
	play(t, s, true, reqHeaders(), reqBody(streamChat), respHeaders(false, ":status", "200", "content-type", "text/event-stream"),
		respBody(chunk(strings.Repeat("word ", 40)), false))
	rec := usage.only(t)
	if rec.Status != 499 || !rec.Estimated || rec.PromptTokens == 0 || rec.CompletionTokens < 50 {
		t.Errorf("record %+v: want 499 with the prompt and ~50 streamed tokens estimated", rec)
	}
}

// The client's credentials and cookies never reach the provider, and the
// routing headers go to Envoy's routes.
func TestRequestHeadersForTheProvider(t *testing.T) {
	s, _, _ := newFaultServer(t)
	out := play(t, s, false, reqHeaders("cookie", "session=1", "x-api-key", "k"), reqBody(streamChat))
	mut := out[1].GetRequestBody().GetResponse().GetHeaderMutation()
	removed := strings.Join(mut.GetRemoveHeaders(), ",")
	for _, h := range []string{"cookie", "authorization", "x-api-key", "api-key", "openai-organization"} {
		if !strings.Contains(removed, h) {
			t.Errorf("%s not removed (removed %s)", h, removed)
		}
	}
	set := map[string]string{}
	for _, h := range mut.GetSetHeaders() {
		set[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	if set["authorization"] != "Bearer provider-key" || set[routing.ModelHeader] != "gpt-x" || set[routing.StreamHeader] != "1" ||
		set["x-modelgate-backend"] != "b" {
		t.Errorf("set headers %v", set)
	}
}

// panickyPassthrough is the Responses passthrough with panicky's bug.
type panickyPassthrough struct{ *responses.Passthrough }

func (p panickyPassthrough) ResponseBody(chunk []byte, eos bool) ([]byte, error) {
	if bytes.Contains(chunk, []byte("PANIC")) {
		panic("a translator bug")
	}
	return p.Passthrough.ResponseBody(chunk, eos)
}

// A Responses stream the gateway fails mid-stream ends as Responses
// streams end, numbered on: an error event and response.failed, which
// clients that ignore error events (Codex) end on, not a chat error.
func TestPanicMidResponsesStream(t *testing.T) {
	s, _, _ := newFaultServer(t)
	p := s.providers["openai"]
	p.Responses = func(tg translate.Target, r *responses.Request, history []json.RawMessage, id string) providers.ResponsesTranslator {
		return panickyPassthrough{responses.NewPassthrough(tg, r, history, id)}
	}
	s.providers["openai"] = p
	created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_up","object":"response","created_at":1,"status":"in_progress","model":"up","output":[],` +
		`"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"parallel_tool_calls":true,"previous_response_id":null,` +
		`"temperature":1,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled"}}`
	headers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hdrs(false,
		":method", "POST", ":path", "/v1/responses", "authorization", "Bearer sk-client", "x-request-id", "r1")}}
	out := play(t, s, false, headers, reqBody(`{"model":"gpt-x","input":"hi","stream":true}`),
		respHeaders(false, ":status", "200", "content-type", "text/event-stream"),
		respBody("event: response.created\ndata: "+created+"\n\n", false), respBody("PANIC", false), respBody("", true))
	stream := string(out[3].GetResponseBody().GetResponse().GetBodyMutation().GetBody()) +
		string(out[4].GetResponseBody().GetResponse().GetBodyMutation().GetBody())
	spec.ValidateSSE(t, "ResponseStreamEvent", []byte(stream))
	if !strings.Contains(stream, "event: error\n") || !strings.Contains(stream, "event: response.failed\n") ||
		!strings.Contains(stream, `"sequence_number":2`) || !strings.Contains(stream, `"status":"failed"`) {
		t.Errorf("stream %s: want response.created, error and response.failed, numbered on", stream)
	}
}
