package extproc_test

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/guard"
	"modelgate/extproc/wire"
	"modelgate/translate"
)

// benchClient is an ext_proc client on loopback gRPC playing Envoy's
// messages for one request at a time.
type benchClient struct {
	client extprocv3.ExternalProcessorClient
	key    string
}

func newBenchClient(b *testing.B, rules ...*guard.Rule) *benchClient {
	b.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	acct, _ := store.CreateAccount(ctx, "bench")
	key, _, _ := authz.CreateKey(ctx, store, acct.ID, "", nil)
	srv, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
			Models: []routing.Model{{ID: "gpt-4o", Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-4o-2024-08-06"}}}}},
		Credentials: map[string]extproc.Credentials{"main": {APIKey: "provider"}},
		Guardrails:  extproc.Guardrails{Rules: rules, Window: guard.Window{Size: 128, Overlap: 64}},
	}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		b.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	gs := grpc.NewServer(grpc.ForceServerCodecV2(wire.Codec())) // as serve runs it
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	go gs.Serve(l)
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return &benchClient{client: extprocv3.NewExternalProcessorClient(conn), key: key}
}

func hdrs(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

// exchange plays one request: headers, body, response headers, then the
// response body chunks (the last with end_of_stream).
func (c *benchClient) exchange(b *testing.B, body []byte, contentType string, chunks [][]byte) {
	s, err := c.client.Process(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	send := func(r *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if err := s.Send(r); err != nil {
			b.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: hdrs(":method", "POST", ":path", "/v1/chat/completions", "authorization", "Bearer "+c.key,
			"content-type", "application/json", "content-length", strconv.Itoa(len(body)), "x-request-id", "bench")}}})
	if r := send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); r.GetRequestBody() == nil {
		b.Fatalf("request body reply = %v", r)
	}
	send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: hdrs(":status", "200", "content-type", contentType)}}})
	// Envoy pipelines chunks: send them all, then read the replies.
	go func() {
		for i, ch := range chunks {
			s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: ch, EndOfStream: i == len(chunks)-1}}})
		}
	}()
	for range chunks {
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
	}
	s.CloseSend()
}

const benchRequest = `{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hello!"}],"temperature":0.7,"max_completion_tokens":256}`

func BenchmarkBufferedChat(b *testing.B) {
	c := newBenchClient(b)
	resp := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1755133833,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there! How can I help you today?","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_1"}`)
	b.ReportAllocs()
	for b.Loop() {
		c.exchange(b, []byte(benchRequest), "application/json", [][]byte{resp})
	}
}

func BenchmarkStream200Chunks(b *testing.B) { benchStream(b, newBenchClient(b)) }

// BenchmarkStream200ChunksGuarded is BenchmarkStream200Chunks with a
// regular expression on the request's user text and one on the streamed
// answer, neither matching: the cost of guardrails that let all through.
func BenchmarkStream200ChunksGuarded(b *testing.B) {
	never := []*regexp.Regexp{regexp.MustCompile(`(?i)forbidden-word|zebra-[0-9]+`)}
	benchStream(b, newBenchClient(b,
		&guard.Rule{Name: "in", Check: "regex", Phase: guard.Request, Action: guard.Block, Patterns: never, Parts: []translate.Part{translate.PartUser}},
		&guard.Rule{Name: "out", Check: "regex", Phase: guard.Response, Action: guard.Block, Patterns: never, Kinds: []translate.TextKind{translate.TextAnswer}}))
}

func benchStream(b *testing.B, c *benchClient) {
	body := []byte(benchRequest[:len(benchRequest)-1] + `,"stream":true}`)
	chunk := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1755137933,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],"usage":null,"obfuscation":"LcdzdJdMMgDHt6"}` + "\n\n")
	chunks := make([][]byte, 0, 202)
	for range 200 {
		chunks = append(chunks, chunk)
	}
	chunks = append(chunks, []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":200,"total_tokens":219}}`+"\n\ndata: [DONE]\n\n"), nil)
	b.ReportAllocs()
	for b.Loop() {
		c.exchange(b, body, "text/event-stream", chunks)
	}
}
