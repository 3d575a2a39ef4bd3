package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultProvider is a scripted OpenAI-compatible provider on 127.0.0.1:
// the upstream model name picks what it does. Handlers that hang return
// when the gateway gives up on them (the request's context) or when the
// test ends.
type faultProvider struct {
	*httptest.Server
	done    chan struct{}
	release chan struct{} // closed: held answers go out
	proceed chan struct{} // reset-stream resets once the client saw its start

	mu    sync.Mutex
	calls map[string]int // requests by upstream model name
}

// count is how many requests asked for an upstream model.
func (p *faultProvider) count(model string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[model]
}

// Behaviours of the fault provider, by upstream model name.
const (
	faultOK            = "ok"             // a chat answer with usage, JSON or SSE
	faultHangHeaders   = "hang-headers"   // accepts the request and says nothing
	faultHangStream    = "hang-stream"    // starts a stream, then says nothing
	faultResetBody     = "reset-body"     // resets the connection midway through a JSON body
	faultResetStream   = "reset-stream"   // resets the connection midway through a stream
	faultEndStream     = "end-stream"     // ends a stream cleanly but early: two chunks, no finish_reason, no [DONE]
	faultEmpty200      = "empty-200"      // 200 with an empty body
	faultHTML200       = "html-200"       // 200 with an HTML page
	faultNotJSON200    = "notjson-200"    // 200 application/json that is not JSON
	faultNullChoices   = "null-choices"   // a stream with schema-breaking chunks, then usage
	faultError500      = "error-500"      // 500 with an OpenAI error body
	faultError429      = "error-429"      // 429 with an OpenAI error body and Retry-After
	faultBigEmbeddings = "big-embeddings" // a 40 MB embeddings answer of unknown length
	faultHeld          = "held"           // answers as ok once the test releases it
)

// bigEmbeddings is the answer of big-embeddings: 2,048 inputs on a
// 1,536-dimension model.
const bigInputs, bigDims = 2048, 1536

func newFaultProvider(t *testing.T) *faultProvider {
	t.Helper()
	p := &faultProvider{done: make(chan struct{}), release: make(chan struct{}), proceed: make(chan struct{}, 1), calls: map[string]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		close(p.done)
		p.Close()
	})
	return p
}

func (p *faultProvider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(body, &req) //nolint:errcheck // a bad body is the gateway's bug; the model is then ""
	p.mu.Lock()
	p.calls[req.Model]++
	p.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer fault-provider-key" {
		http.Error(w, `{"error":{"message":"bad provider key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, http.StatusUnauthorized)
		return
	}
	switch req.Model {
	case faultOK:
		if req.Stream {
			sseChunks(w, []string{chunkJSON(`{"role":"assistant","content":""}`, ""), chunkJSON(`{"content":"Hello there"}`, ""),
				chunkJSON(`{}`, `"stop"`), usageJSON(), "[DONE]"})
			return
		}
		writeJSON(w, 200, chatJSON())
	case faultHangHeaders:
		p.hang(r)
	case faultHeld:
		select {
		case <-p.release:
		case <-p.done:
		}
		writeJSON(w, 200, chatJSON())
	case faultHangStream:
		sseChunks(w, []string{chunkJSON(`{"role":"assistant","content":"Hel"}`, "")})
		p.hang(r)
	case faultResetBody:
		b := chatJSON()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(200)
		w.Write(b[:len(b)/2]) //nolint:errcheck // the connection is reset next
		reset(w)
	case faultResetStream:
		sseChunks(w, []string{chunkJSON(`{"role":"assistant","content":"Hel"}`, ""), chunkJSON(`{"content":"lo, wor"}`, "")})
		select { // a reset before the stream's head went out is Envoy's 502 instead
		case <-p.proceed:
		case <-time.After(10 * time.Second):
		}
		reset(w)
	case faultEndStream:
		// The body ends (the last chunk of the chunked encoding): a clean
		// end of the HTTP response, but not of the provider's stream.
		sseChunks(w, []string{chunkJSON(`{"role":"assistant","content":"Hel"}`, ""), chunkJSON(`{"content":"lo, wor"}`, "")})
	case faultEmpty200:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(200)
	case faultHTML200:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(200)
		io.WriteString(w, "<html><body>Bad gateway at the provider's proxy</body></html>") //nolint:errcheck // best effort
	case faultNotJSON200:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, "upstream connect error") //nolint:errcheck // best effort
	case faultNullChoices:
		sseChunks(w, []string{`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[null]}`,
			chunkJSON(`{"role":"assistant","content":"Hi"}`, ""), `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":null}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":null}]}`,
			chunkJSON(`{}`, `"stop"`), usageJSON(), "[DONE]"})
	case faultError500:
		writeJSON(w, 500, []byte(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`))
	case faultError429:
		w.Header().Set("Retry-After", "7")
		writeJSON(w, 429, []byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
	case faultBigEmbeddings:
		bigEmbeddingsAnswer(w)
	default:
		http.Error(w, "unknown fault "+req.Model, 400)
	}
}

// hang waits until the gateway gives up or the test ends.
func (p *faultProvider) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-p.done:
	case <-time.After(time.Minute):
	}
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // the gateway went away
}

func chatJSON() []byte {
	return []byte(`{"id":"chatcmpl-f","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"Hello there, how may I help you today?","refusal":null,"annotations":[]},` +
		`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22}}`)
}

func chunkJSON(delta, finish string) string {
	if finish == "" {
		finish = "null"
	}
	return `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + finish + `}]}`
}

func usageJSON() string {
	return `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m","choices":[],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`
}

// sseChunks writes events one flush each.
func sseChunks(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		w.(http.Flusher).Flush()
	}
}

// reset sends what is written so far and resets the connection (RST).
func reset(w http.ResponseWriter) {
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) //nolint:errcheck // a reset or a close: either breaks the body
	}
	conn.Close()
}

// bigEmbeddingsAnswer streams a 40 MB CreateEmbeddingResponse without a
// content length, as a provider behind a chunking proxy would.
func bigEmbeddingsAnswer(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	var vec bytes.Buffer
	vec.WriteByte('[')
	for d := range bigDims {
		if d > 0 {
			vec.WriteByte(',')
		}
		fmt.Fprintf(&vec, "%.9f", float32(d%97)/97-0.5)
	}
	vec.WriteByte(']')
	io.WriteString(w, `{"object":"list","data":[`) //nolint:errcheck // the gateway went away
	for i := range bigInputs {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, `%s{"object":"embedding","index":%d,"embedding":%s}`, sep, i, vec.Bytes())
	}
	io.WriteString(w, `],"model":"text-embedding-3-small","usage":{"prompt_tokens":4096,"total_tokens":4096}}`) //nolint:errcheck // as above
}

// faultModels lists every behaviour as a public model of backend, and the
// null-choices stream once per compatible quirk set ("null-choices-vllm").
func faultModels(backend string, compatible []string) string {
	var b strings.Builder
	for _, m := range []string{faultOK, faultHangHeaders, faultHangStream, faultResetBody, faultResetStream, faultEndStream, faultEmpty200,
		faultHTML200, faultNotJSON200, faultNullChoices, faultError500, faultError429, faultBigEmbeddings, faultHeld} {
		fmt.Fprintf(&b, "  - {id: %s, deployments: [{backend: %s, model: %s}]}\n", m, backend, m)
	}
	for _, c := range compatible {
		fmt.Fprintf(&b, "  - {id: %s-%s, deployments: [{backend: quirks-%s, model: %s}]}\n", faultNullChoices, c, c, faultNullChoices)
	}
	return b.String()
}
