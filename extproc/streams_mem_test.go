package extproc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/extproc/wire"
	"modelgate/ratelimit/memory"
)

// The memory an open ext_proc stream costs. Envoy opens one stream per
// HTTP request and keeps it open for the whole answer, so a gateway
// serving 10,000 streamed chat answers at once holds 10,000 streams; the
// target is at most 32 KiB of heap for each.
//
// The client's side of every stream (gRPC's client stream and its
// goroutine) lives in the same process, so what is measured is an upper
// bound for the server's share. A run against a no-op ext_proc server
// measures what gRPC alone costs per stream, client and server side
// (grpc-heap-B/stream); the difference, server-heap-B/stream, is what
// modelgate's handler keeps per stream beyond gRPC's server stream. Each
// stream has two goroutines: the server's handler and the gRPC client
// stream's watcher.

const (
	// openStreamsTarget is the most heap an open stream may cost.
	openStreamsTarget = 32 << 10
	// openStreamsConns is how many HTTP/2 connections carry the streams,
	// as Envoy spreads its streams over a few. (gRPC-Go servers allow
	// unlimited concurrent streams per connection unless
	// grpc.MaxConcurrentStreams says otherwise.)
	openStreamsConns = 4
	// openStreamsWorkers bounds the goroutines opening and ending streams.
	openStreamsWorkers = 32
)

var (
	streamsMemRequest = []byte(benchRequest[:len(benchRequest)-1] + `,"stream":true}`)
	streamsMemChunk   = []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1755137933,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],"usage":null,"obfuscation":"LcdzdJdMMgDHt6"}` + "\n\n")
	streamsMemLast    = []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":200,"total_tokens":219}}` + "\n\ndata: [DONE]\n\n")
)

func BenchmarkOpenStreams10k(b *testing.B) {
	const n = 10_000
	var gate, noop streamsMem
	for b.Loop() {
		srv, key, check := newStreamsMemServer(b)
		gate = measureOpenStreams(b, srv, key, n)
		check(b, n)
		noop = measureOpenStreams(b, extproctest.Noop{}, "", n)
	}
	b.ReportMetric(gate.heapPerStream(), "heap-B/stream")
	b.ReportMetric(gate.stackPerStream(), "stack-B/stream")
	b.ReportMetric(gate.goroutinesPerStream(), "goroutines/stream")
	b.ReportMetric(noop.heapPerStream(), "grpc-heap-B/stream")
	b.ReportMetric(noop.stackPerStream(), "grpc-stack-B/stream")
	b.ReportMetric(gate.heapPerStream()-noop.heapPerStream(), "server-heap-B/stream")
	b.Logf("%d streams opened in %v, ended in %v", n, gate.openTime, gate.endTime)
	if gate.heapPerStream() > openStreamsTarget {
		b.Errorf("%.0f B of heap per open stream, over the target of %d", gate.heapPerStream(), openStreamsTarget)
	}
}

// A smaller run asserts the target in ordinary tests. The measurement is
// an upper bound (it includes gRPC's client side), and fixed costs are
// outside it: the baseline is taken with the connections up and warm.
func TestOpenStreamsMemory(t *testing.T) {
	const n = 500
	srv, key, check := newStreamsMemServer(t)
	m := measureOpenStreams(t, srv, key, n)
	check(t, n)
	t.Logf("%d streams: %.0f B of heap, %.0f B of stack, %.2f goroutines per stream",
		n, m.heapPerStream(), m.stackPerStream(), m.goroutinesPerStream())
	if m.heapPerStream() > openStreamsTarget {
		t.Errorf("%.0f B of heap per open stream, over the target of %d", m.heapPerStream(), openStreamsTarget)
	}
}

// newStreamsMemServer builds the server as cmd/modelgate does for one
// replica: SQLite store, one key, the in-memory rate limiter with limits
// every request passes (so each stream holds a concurrency lease). check
// verifies that every one of n streams was recorded once it ended.
func newStreamsMemServer(tb testing.TB) (srv extprocv3.ExternalProcessorServer, key string, check func(testing.TB, int)) {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "m.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	acct, err := store.CreateAccount(ctx, "streams")
	if err != nil {
		tb.Fatal(err)
	}
	key, _, err = authz.CreateKey(ctx, store, acct.ID, "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	high := func(v int64) *int64 { return &v }
	s, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
			Models: []routing.Model{{ID: "gpt-4o", Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-4o-2024-08-06"}}}}},
		Credentials: map[string]extproc.Credentials{"main": {APIKey: "provider"}},
		Limiter:     memory.New(memory.Config{}),
		KeyLimits: authz.Limits{RequestsPerMinute: high(1e9), TokensPerMinute: high(1e12),
			ConcurrentRequests: high(1e6)},
	}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		tb.Fatal(err)
	}
	check = func(tb testing.TB, n int) {
		tb.Helper()
		// Each stream's usage record is written before its last reply is
		// sent; the warm-up requests add one per connection.
		totals, err := store.UsageSince(ctx, acct.ID, time.Time{})
		if err != nil {
			tb.Fatal(err)
		}
		if want := int64(n + openStreamsConns); totals.Requests != want {
			tb.Errorf("%d usage records, want %d", totals.Requests, want)
		}
	}
	return s, key, check
}

// streamsMem is what n open streams added to the process.
type streamsMem struct {
	n                 int
	heap, stack       int64 // bytes: HeapAlloc and StackInuse
	goroutines        int
	openTime, endTime time.Duration
}

func (m streamsMem) heapPerStream() float64       { return float64(m.heap) / float64(m.n) }
func (m streamsMem) stackPerStream() float64      { return float64(m.stack) / float64(m.n) }
func (m streamsMem) goroutinesPerStream() float64 { return float64(m.goroutines) / float64(m.n) }

// measureOpenStreams serves srv on loopback, opens n streams to the middle
// of a streamed chat answer and measures what they hold, then ends them
// and checks that each finished cleanly. key is the API key the requests
// present.
func measureOpenStreams(tb testing.TB, srv extprocv3.ExternalProcessorServer, key string, n int) streamsMem {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(wire.Codec())) // as serve runs it
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	go gs.Serve(l)
	defer gs.Stop()
	var clients []extprocv3.ExternalProcessorClient
	for range openStreamsConns {
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			tb.Fatal(err)
		}
		defer conn.Close()
		clients = append(clients, extprocv3.NewExternalProcessorClient(conn))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends whatever streams a failure left open
	// One whole request on each connection first: connections, caches,
	// pools and prepared statements are fixed costs, not the streams'.
	for _, c := range clients {
		s, err := openStreamsMid(ctx, c, key)
		if err == nil {
			err = endStreamsMid(s)
		}
		if err != nil {
			tb.Fatalf("warm-up: %v", err)
		}
	}
	streams := make([]extprocv3.ExternalProcessor_ProcessClient, n)

	before := readStreamsMem()
	start := time.Now()
	err = forEachStream(n, func(i int) error {
		s, err := openStreamsMid(ctx, clients[i%len(clients)], key)
		streams[i] = s
		return err
	})
	if err != nil {
		tb.Fatalf("opening streams: %v", err)
	}
	openTime := time.Since(start)
	after := readStreamsMem()

	start = time.Now()
	err = forEachStream(n, func(i int) error { return endStreamsMid(streams[i]) })
	if err != nil {
		tb.Fatalf("ending streams: %v", err)
	}
	return streamsMem{
		n:          n,
		heap:       int64(after.HeapAlloc) - int64(before.HeapAlloc),
		stack:      int64(after.StackInuse) - int64(before.StackInuse),
		goroutines: after.goroutines - before.goroutines,
		openTime:   openTime,
		endTime:    time.Since(start),
	}
}

// forEachStream runs f for 0..n-1 on a few goroutines and returns the
// first error.
func forEachStream(n int, f func(i int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range openStreamsWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("stream %d: %w", i, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

type memSample struct {
	runtime.MemStats
	goroutines int
}

// readStreamsMem reads live memory. Two collections also empty the
// sync.Pools' victim caches, so pooled buffers do not count.
func readStreamsMem() memSample {
	runtime.GC()
	runtime.GC()
	var m memSample
	runtime.ReadMemStats(&m.MemStats)
	m.goroutines = runtime.NumGoroutine()
	return m
}

// openStreamsMid plays Envoy's messages up to the middle of a streamed
// chat answer: request headers, the buffered body, the response headers
// (whose reply switches the body to STREAMED) and one SSE chunk. The
// stream stays open.
func openStreamsMid(ctx context.Context, c extprocv3.ExternalProcessorClient, key string) (extprocv3.ExternalProcessor_ProcessClient, error) {
	s, err := c.Process(ctx)
	if err != nil {
		return nil, err
	}
	r, err := streamsMemRoundTrip(s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: hdrs(":method", "POST", ":path", "/v1/chat/completions", "authorization", "Bearer "+key,
			"content-type", "application/json", "content-length", strconv.Itoa(len(streamsMemRequest)), "x-request-id", "streams")}}})
	if err != nil {
		return s, err
	}
	if r.GetRequestHeaders() == nil {
		return s, fmt.Errorf("request headers reply = %v", r)
	}
	r, err = streamsMemRoundTrip(s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{
		Body: streamsMemRequest, EndOfStream: true}}})
	if err != nil {
		return s, err
	}
	if r.GetRequestBody() == nil {
		return s, fmt.Errorf("request body reply = %v", r)
	}
	r, err = streamsMemRoundTrip(s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: hdrs(":status", "200", "content-type", "text/event-stream")}}})
	if err != nil {
		return s, err
	}
	if r.GetResponseHeaders() == nil || r.GetModeOverride().GetResponseBodyMode() != filterv3.ProcessingMode_STREAMED {
		return s, fmt.Errorf("response headers reply = %v", r)
	}
	r, err = streamsMemRoundTrip(s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: streamsMemChunk}}})
	if err != nil {
		return s, err
	}
	if r.GetResponseBody() == nil {
		return s, fmt.Errorf("response body reply = %v", r)
	}
	return s, nil
}

// endStreamsMid sends the last chunk of the answer, half-closes as Envoy
// does and expects the server to end the stream with OK.
func endStreamsMid(s extprocv3.ExternalProcessor_ProcessClient) error {
	r, err := streamsMemRoundTrip(s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: streamsMemLast, EndOfStream: true}}})
	if err != nil {
		return err
	}
	if r.GetResponseBody() == nil {
		return fmt.Errorf("last response body reply = %v", r)
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if r, err := s.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the last chunk: %v, %v; want the stream to end with OK", r, err)
	}
	return nil
}

func streamsMemRoundTrip(s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := s.Send(req); err != nil {
		return nil, err
	}
	return s.Recv()
}
