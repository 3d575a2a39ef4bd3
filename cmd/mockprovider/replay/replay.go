// Package replay is the mock provider: an upstream that answers like the
// real provider by replaying recorded traffic byte for byte.
//
// It serves OpenAI's POST /v1/chat/completions. The recording is chosen the
// way OpenAI would answer: a stream without stream_options.include_usage
// gets the recorded stream, a stream with it the same stream with each
// chunk's "usage":null and a usage chunk (that of another recorded stream,
// whose text was all reasoning: see withUsage), anything else the recorded
// JSON completion. Tests pick other scenarios with the request's model:
//
//	model            replays
//	mock-tools       openai/chat/chat-tools (a tool call); streamed, as
//	                 OpenAI streams it (derived: see chatStream)
//	mock-roundtrip   a recorded tool call, then (after the tool result) the
//	                 recorded answer: test_openai_tool_output, streamed
//	                 test_run_stream_sync_streams_real_model
//	mock-error-400   openai/errors/chat-bad-request (400 invalid_request_error)
//	mock-error-404   openai/errors/chat-unknown-model (404 model_not_found)
//	mock-ollama      openai-compatible/test_ollama_local_native_output_uses_json_schema;
//	                 streamed, derived from it like mock-tools
//	mock-slow        openai/chat/chat-streaming-detailed-usage, 100ms per
//	                 event, even to a request for JSON
//	mock-truncated   the recorded stream cut off mid-event, without [DONE]
//	mistral-*        Mistral's recorded answer; streams: its thinking stream
//	*mock-agent*     not a recording: the scripted model (package
//	                 scripted), on every route that serves chat
//
// It also serves Anthropic's POST /v1/messages (key in x-api-key): a
// recorded text answer, the recorded thinking stream for stream requests,
// and the recorded parallel tool calls (mock-tools) and 400
// (mock-error-400). A request that carries the model's earlier turns (a
// tool-call round trip) replays the recording's next interaction. And
// Gemini's POST /v1beta/models/{model}:generateContent
// and :streamGenerateContent (key in x-goog-api-key), and Cohere's
// POST /v2/chat (its streams are derived from the recorded JSON answer, as
// no Cohere stream was recorded), and Bedrock's
// POST /model/{id}/converse and /converse-stream (binary event-stream).
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"modelgate/cmd/mockprovider/guards"
	"modelgate/cmd/mockprovider/scripted"
)

// Config configures the mock.
type Config struct {
	// Recordings holds the fixtures folder of testdata.Recordings (required).
	Recordings fs.FS
	// APIKey, when set, must be presented as "Authorization: Bearer <key>".
	APIKey string
	// ChunkSize is how many bytes of a stream are written per flush; zero
	// writes one SSE event per flush.
	ChunkSize int
	// Delay is the pause between stream writes.
	Delay time.Duration
	// PathPrefix is prepended to /v1/... paths.
	PathPrefix string
}

// Limits on what the mock reads and keeps of the requests it receives.
const (
	// KeptRequests is how many requests Requests returns at most: the
	// most recent ones.
	KeptRequests = 64
	// KeptBodyBytes is how much of each body a kept Request holds.
	KeptBodyBytes = 256 << 10
	// MaxBodyBytes is the largest body the mock reads; a larger one gets
	// a 413.
	MaxBodyBytes = 64 << 20
)

// Request is a request the mock received, as kept for inspection.
type Request struct {
	Method, Path string
	Header       http.Header
	// Body is the body, or its first KeptBodyBytes when Truncated.
	Body []byte
	// Size is the length of the whole body.
	Size int64
	// Truncated reports that Body holds only a prefix of the body.
	Truncated bool
}

// Server is the mock provider, an http.Handler.
type Server struct {
	cfg Config
	mux *http.ServeMux
	// guards are the guard services' emulators, under /guard: they check
	// their own credentials (package guards).
	guards http.Handler

	// methods serve further operations on the shared Gemini, Vertex and
	// Bedrock routes, keyed "gemini:<method>", "vertex:<method>" and
	// "bedrock:<op>" (embeddings and images register theirs here). The
	// first handler that reports true answered the request.
	methods map[string][]func(http.ResponseWriter, *http.Request, []byte) bool

	mu       sync.Mutex
	requests []Request // a ring of the last KeptRequests requests
	next     int       // where the next request goes in requests
}

// New returns a mock provider.
func New(cfg Config) (*Server, error) {
	if cfg.Recordings == nil {
		return nil, fmt.Errorf("replay: Recordings is required")
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), guards: guards.Handler(cfg.PathPrefix + "/guard"), methods: map[string][]func(http.ResponseWriter, *http.Request, []byte) bool{}}
	s.embeddingRoutes()
	s.imageRoutes()
	s.audioRoutes()
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/v1/chat/completions", s.chat)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/openai/deployments/{deployment}/chat/completions", azureDeployment(s.azure))
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/v1/responses", s.responses)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/openai/v1/responses", s.responses)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/v1/messages", s.messages)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/v1/messages/count_tokens", s.countTokens)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/v1beta/models/{call}", s.gemini)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/v2/chat", s.cohere)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/model/{model}/{op}", s.bedrock)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{call}", s.vertex)
	s.mux.HandleFunc("POST "+cfg.PathPrefix+"/token", s.token)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
	})
	return s, nil
}

// Requests returns the most recent requests received, oldest first: at
// most KeptRequests of them, each with at most KeptBodyBytes of its body.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, len(s.requests))
	out = append(out, s.requests[s.next:]...)
	return append(out, s.requests[:s.next]...)
}

// record keeps r, with a copy of the first KeptBodyBytes of its body (a
// copy, so that a large body's array is not kept alive), in place of the
// oldest request once KeptRequests are kept.
func (s *Server) record(r *http.Request, body []byte, size int64) {
	kept := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Size: size,
		Truncated: size > int64(len(body)) || len(body) > KeptBodyBytes}
	kept.Body = bytes.Clone(body[:min(len(body), KeptBodyBytes)])
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) < KeptRequests {
		s.requests = append(s.requests, kept)
	} else {
		s.requests[s.next] = kept
	}
	s.next = (s.next + 1) % KeptRequests
}

// bodyKey is the context key of the body ServeHTTP read.
type bodyKey struct{}

// requestBody is the body ServeHTTP read for r, which handlers parse
// instead of reading r.Body again.
func requestBody(r *http.Request) []byte {
	body, _ := r.Context().Value(bodyKey{}).([]byte)
	return body
}

// readBody reads r's body, at most MaxBodyBytes of it, in one allocation
// when its length is known.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, &http.MaxBytesError{Limit: MaxBodyBytes}
	}
	var b bytes.Buffer
	b.Grow(int(max(r.ContentLength, 0)) + bytes.MinRead)
	_, err := b.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	return b.Bytes(), err
}

// ServeHTTP records the request, checks the key and answers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		size := max(r.ContentLength, int64(len(body)))
		s.record(r, body, size)
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", fmt.Sprintf("The body exceeds the mock's limit of %d bytes.", MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not read the body")
		return
	}
	s.record(r, body, int64(len(body)))
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if strings.HasPrefix(r.URL.Path, s.cfg.PathPrefix+"/guard/") {
		s.guards.ServeHTTP(w, r)
		return
	}
	if s.cfg.APIKey != "" && !s.authorized(r.Header) && r.URL.Path != s.cfg.PathPrefix+"/token" {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// scriptedModel reports whether model is the scripted model (package
// scripted), which behaves like a model instead of replaying one: any
// model whose name holds "mock-agent".
func scriptedModel(model string) bool { return strings.Contains(model, "mock-agent") }

// turn counts the model's earlier turns in a request: a tool-call round
// trip replays the next recorded interaction.
func turn(body []byte) int {
	var req struct {
		Messages []struct{ Role string } `json:"messages"`
		Contents []struct{ Role string } `json:"contents"`
	}
	json.Unmarshal(body, &req) //nolint:errcheck // a bad body counts no turns
	n := 0
	for _, m := range append(req.Messages, req.Contents...) {
		if m.Role == "assistant" || m.Role == "model" {
			n++
		}
	}
	return n
}

type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	if scriptedModel(req.Model) {
		scripted.Chat(w, body)
		return
	}
	sc := s.pick(req)
	rec, err := s.chatRecording(sc, req, body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	if sc.truncate {
		rec.body = rec.body[:bytes.LastIndex(rec.body[:len(rec.body)/2], []byte("\n\n"))+len("\n\ndata: {\"id\":")]
	}
	if req.Model == "mock-slow" {
		rec.delay = 100 * time.Millisecond
	}
	s.replay(w, rec)
}

// serveMethod offers the request to the handlers registered for key, with
// its body; r.Body stays readable for the caller when none answered.
func (s *Server) serveMethod(key string, w http.ResponseWriter, r *http.Request) bool {
	handlers := s.methods[key]
	if len(handlers) == 0 {
		return false
	}
	body := requestBody(r)
	for _, h := range handlers {
		if h(w, r, body) {
			return true
		}
	}
	return false
}

// authorized accepts the key the way each provider takes it.
func (s *Server) authorized(h http.Header) bool {
	k := s.cfg.APIKey
	return h.Get("Authorization") == "Bearer "+k || h.Get("X-Api-Key") == k || h.Get("X-Goog-Api-Key") == k || h.Get("Api-Key") == k
}

// gemini serves generateContent and streamGenerateContent from the Gemini
// recordings; the model mock-tools answers with a recorded function call.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	if s.serveMethod("gemini:"+method, w, r) {
		return
	}
	if scriptedModel(model) && (method == "generateContent" || method == "streamGenerateContent") {
		scripted.Gemini(w, method == "streamGenerateContent", model, requestBody(r))
		return
	}
	dir := "gemini/test_google_model.bodies"
	switch {
	case model == "mock-tools":
		dir = "gemini/test_google_model_iter_stream.bodies"
	case method == "streamGenerateContent":
		dir = "gemini/test_google_model_stream.bodies"
	}
	if method != "generateContent" && method != "streamGenerateContent" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "unknown method "+method)
		return
	}
	body := requestBody(r)
	rec, err := s.loadTurn(dir, turn(body))
	if err == nil && model == "mock-tools" && method == "generateContent" {
		rec, err = geminiJSON(rec)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.replay(w, rec)
}

// azureDeployment serves an Azure OpenAI deployment path with h, which
// requires an api-version as Azure does.
func azureDeployment(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("api-version") == "" {
			writeError(w, http.StatusNotFound, "invalid_request_error", "", "api-version is required")
			return
		}
		h(w, r)
	}
}

// azure serves Azure OpenAI's deployment path from the Azure recording;
// streams are OpenAI's recorded streams.
func (s *Server) azure(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req chatRequest
	if json.Unmarshal(body, &req) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not parse the JSON body")
		return
	}
	sc := scenario{dir: "azure/azure-chat-basic.bodies"}
	if req.Stream || strings.HasPrefix(req.Model, "mock-") {
		sc = s.pick(req)
	}
	rec, err := s.chatRecording(sc, req, body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.replay(w, rec)
}

// vertex serves Vertex AI: Google's publisher from the Vertex (and Gemini)
// recordings, Anthropic's from the Anthropic ones.
func (s *Server) vertex(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	if s.serveMethod("vertex:"+method, w, r) {
		return
	}
	switch {
	case scriptedModel(model) && r.PathValue("publisher") == "anthropic":
		scripted.Messages(w, requestBody(r))
		return
	case scriptedModel(model) && (method == "generateContent" || method == "streamGenerateContent"):
		scripted.Gemini(w, method == "streamGenerateContent", model, requestBody(r))
		return
	}
	var dir string
	switch {
	case model == "mock-tools":
		dir = "gemini/test_google_model_iter_stream.bodies"
	case model == "claude-mock-tools":
		dir = "anthropic/test_multiple_parallel_tool_calls.bodies"
	case r.PathValue("publisher") == "anthropic" && method == "streamRawPredict":
		dir = "anthropic/test_anthropic_model_thinking_part_stream.bodies"
	case r.PathValue("publisher") == "anthropic" && method == "rawPredict":
		dir = "anthropic/test_anthropic_model_instructions.bodies"
	case method == "generateContent":
		dir = "gemini/vertex/test_google_model_vertex_provider.bodies"
	case method == "streamGenerateContent":
		dir = "gemini/vertex/test_google_vertex_service_tier_flex_stream.bodies"
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "unknown method "+method+" for "+model)
		return
	}
	body := requestBody(r)
	rec, err := s.loadTurn(dir, turn(body))
	switch {
	case err == nil && model == "mock-tools" && method == "generateContent":
		rec, err = geminiJSON(rec)
	case err == nil && model == "claude-mock-tools" && method == "streamRawPredict":
		rec, err = anthropicStream(rec)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.replay(w, rec)
}

// token is an OAuth2 token endpoint for the JWT bearer grant: it hands out
// the mock's API key as the access token, so Vertex requests authenticate
// like every other provider's. It does not verify the assertion.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "unsupported grant")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": s.cfg.APIKey, "expires_in": 3600, "token_type": "Bearer"}) //nolint:errcheck // best effort
}

// bedrock serves Converse and ConverseStream from the Bedrock recordings,
// the stream as the recorded binary event-stream.
func (s *Server) bedrock(w http.ResponseWriter, r *http.Request) {
	if s.serveMethod("bedrock:"+r.PathValue("op"), w, r) {
		return
	}
	if op := r.PathValue("op"); scriptedModel(r.PathValue("model")) && (op == "converse" || op == "converse-stream") {
		scripted.Converse(w, op == "converse-stream", requestBody(r))
		return
	}
	if scriptedModel(r.PathValue("model")) && r.PathValue("op") == "count-tokens" {
		scripted.CountTokens(w, requestBody(r))
		return
	}
	if op := r.PathValue("op"); scriptedModel(r.PathValue("model")) && (op == "invoke" || op == "invoke-with-response-stream") {
		scripted.InvokeModel(w, op == "invoke-with-response-stream", r.PathValue("model"), requestBody(r))
		return
	}
	dir := "bedrock/test_bedrock_model.bodies"
	switch r.PathValue("op") {
	case "converse-stream":
		dir = "bedrock/test_bedrock_model_stream.bodies"
		if r.PathValue("model") == "mock-tools" {
			dir = "bedrock/test_bedrock_model_iter_stream.bodies"
		}
	case "converse":
		if r.PathValue("model") == "mock-tools" {
			dir = "bedrock/test_bedrock_model_iter_stream.bodies"
		}
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "unknown operation")
		return
	}
	body := requestBody(r)
	rec, err := s.loadTurn(dir, turn(body))
	if err == nil && r.PathValue("op") == "converse" && r.PathValue("model") == "mock-tools" {
		rec, err = bedrockJSON(rec)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.replay(w, rec)
}

// cohere serves Cohere's v2 chat from its recordings. No Cohere stream was
// recorded, so stream requests get a 400 rather than invented traffic.
func (s *Server) cohere(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req chatRequest
	if json.Unmarshal(body, &req) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not parse the JSON body")
		return
	}
	var rec recording
	var err error
	if req.Model == "mock-tools" {
		rec, err = s.loadTurn("openai/chat/test_openai_tool_output.bodies", turn(body))
		if err == nil {
			rec, err = cohereFromOpenAI(rec)
		}
	} else {
		rec, err = s.load("cohere/test_request_simple_success_with_vcr.bodies")
	}
	if err == nil && req.Stream {
		rec, err = cohereStream(rec)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.replay(w, rec)
}

// cohereStream derives a v2 chat stream from a recorded JSON response, in
// Cohere's documented event format: no Cohere stream was recorded, so this
// is the one response the mock makes up rather than replays.
func cohereStream(rec recording) (recording, error) {
	var resp struct {
		ID           string          `json:"id"`
		FinishReason string          `json:"finish_reason"`
		Usage        json.RawMessage `json:"usage"`
		Message      struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	}
	if err := json.Unmarshal(rec.body, &resp); err != nil {
		return rec, err
	}
	var out bytes.Buffer
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(&out, "event: %s\ndata: %s\n\n", typ, b)
	}
	event("message-start", map[string]any{"id": resp.ID, "delta": map[string]any{"message": map[string]any{"role": "assistant"}}})
	event("content-start", map[string]any{"index": 0, "delta": map[string]any{"message": map[string]any{"content": map[string]any{"type": "text", "text": ""}}}})
	for _, c := range resp.Message.Content {
		for _, word := range strings.SplitAfter(c.Text, " ") {
			event("content-delta", map[string]any{"index": 0, "delta": map[string]any{"message": map[string]any{"content": map[string]any{"text": word}}}})
		}
	}
	event("content-end", map[string]any{"index": 0})
	for i, tc := range resp.Message.ToolCalls {
		event("tool-call-start", map[string]any{"index": i, "delta": map[string]any{"message": map[string]any{"tool_calls": map[string]any{
			"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Function.Name, "arguments": ""}}}}})
		event("tool-call-delta", map[string]any{"index": i, "delta": map[string]any{"message": map[string]any{"tool_calls": map[string]any{
			"function": map[string]any{"arguments": tc.Function.Arguments}}}}})
		event("tool-call-end", map[string]any{"index": i})
	}
	event("message-end", map[string]any{"delta": map[string]any{"finish_reason": resp.FinishReason, "usage": resp.Usage}})
	return recording{status: rec.status, contentType: "text/event-stream", body: out.Bytes()}, nil
}

// responses serves OpenAI's Responses API (also on Azure's v1 path) from
// the OpenAI recordings. The models mock-tools and mock-roundtrip answer
// with a recorded function call, and after its output with the recorded
// answer.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
		Input  json.RawMessage   `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	if scriptedModel(req.Model) {
		scripted.Responses(w, body)
		return
	}
	var items []struct{ Type string }
	json.Unmarshal(req.Input, &items) //nolint:errcheck // a string input has no items
	n := 0
	for _, it := range items {
		if it.Type == "function_call_output" {
			n++
		}
	}
	tools := req.Model == "mock-tools" || req.Model == "mock-roundtrip"
	var dir string
	switch {
	case req.Model == "mock-error-400":
		dir = "openai/errors/chat-bad-request.bodies"
	case tools && req.Stream:
		dir = "openai/responses/test_openai_responses_stream.bodies"
	case tools:
		dir = "openai/responses/test_openai_responses_model_simple_response_with_tool_call.bodies"
	case req.Stream:
		dir = "openai/responses/test_openai_instructions_with_responses_logprobs_streaming.bodies"
	default:
		dir = "openai/responses/test_openai_responses_model_simple_response.bodies"
	}
	rec, err := s.loadTurn(dir, n)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.replay(w, rec)
}

// messages serves Anthropic's Messages API from the Anthropic recordings.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not parse the JSON body")
		return
	}
	if scriptedModel(req.Model) {
		scripted.Messages(w, body)
		return
	}
	dir := "anthropic/test_anthropic_model_instructions.bodies"
	switch {
	case req.Model == "mock-tools":
		dir = "anthropic/test_multiple_parallel_tool_calls.bodies"
	case req.Model == "mock-error-400":
		dir = "anthropic/test_anthropic_explicit_effort_xhigh_unsupported_model_errors.bodies"
	case req.Stream:
		dir = "anthropic/test_anthropic_model_thinking_part_stream.bodies"
	}
	rec, err := s.loadTurn(dir, turn(body))
	if err == nil && req.Stream && req.Model == "mock-tools" {
		rec, err = anthropicStream(rec)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	s.replay(w, rec)
}

// scenario is the recording a chat request gets and what the mock does
// with it.
type scenario struct {
	dir      string
	truncate bool   // cut the stream off mid-event, without [DONE]
	usage    string // a recorded stream whose usage chunk ends this one (withUsage)
}

func (s *Server) pick(req chatRequest) scenario {
	switch {
	case req.Model == "mock-tools":
		return scenario{dir: "openai/chat/chat-tools.bodies"}
	case req.Model == "mock-roundtrip" && req.Stream:
		return scenario{dir: "openai/chat/test_run_stream_sync_streams_real_model.bodies"}
	case req.Model == "mock-roundtrip":
		return scenario{dir: "openai/chat/test_openai_tool_output.bodies"}
	case req.Model == "mock-error-400":
		return scenario{dir: "openai/errors/chat-bad-request.bodies"}
	case req.Model == "mock-error-404":
		return scenario{dir: "openai/errors/chat-unknown-model.bodies"}
	case req.Model == "mock-ollama":
		return scenario{dir: "openai-compatible/test_ollama_local_native_output_uses_json_schema.bodies"}
	case req.Model == "mock-slow": // a stream a client can leave midway
		return scenario{dir: "openai/chat/chat-streaming-detailed-usage.bodies"}
	case req.Model == "mock-truncated":
		return scenario{dir: "openai/chat/chat-streaming.bodies", truncate: true}
	case strings.HasPrefix(req.Model, "mistral-") || strings.HasPrefix(req.Model, "magistral-"):
		if req.Stream {
			return scenario{dir: "mistral/test_mistral_model_thinking_part_iter.bodies"}
		}
		return scenario{dir: "mistral/test_mistral_forwards_penalties.bodies"}
	case req.Stream && req.includeUsage():
		return scenario{dir: "openai/chat/chat-streaming.bodies", usage: "openai/chat/chat-streaming-detailed-usage.bodies"}
	case req.Stream:
		return scenario{dir: "openai/chat/chat-streaming.bodies"}
	}
	return scenario{dir: "openai/chat/chat-basic.bodies"}
}

func (req chatRequest) includeUsage() bool {
	return req.StreamOptions != nil && req.StreamOptions.IncludeUsage
}

// chatRecording loads the recording of sc for the request's turn. A
// stream request whose scenario was recorded only as a JSON completion
// gets that completion as a stream (chatStream); errors stay JSON, as
// OpenAI answers them to stream requests too.
func (s *Server) chatRecording(sc scenario, req chatRequest, body []byte) (recording, error) {
	rec, err := s.loadTurn(sc.dir, turn(body))
	if err != nil {
		return rec, err
	}
	if sc.usage != "" {
		from, err := s.load(sc.usage)
		if err != nil {
			return rec, err
		}
		return withUsage(rec, from)
	}
	if req.Stream && rec.status/100 == 2 && strings.HasPrefix(rec.contentType, "application/json") {
		return chatStream(rec, req.includeUsage())
	}
	return rec, nil
}

// recording is one recorded response.
type recording struct {
	status      int
	contentType string
	body        []byte
	delay       time.Duration // between stream pieces, beyond Config.Delay
}

func (s *Server) load(dir string) (recording, error) { return s.loadTurn(dir, 0) }

// loadTurn loads interaction n of a recording, or its last one.
func (s *Server) loadTurn(dir string, n int) (recording, error) {
	dir = path.Join("fixtures", dir)
	metaPath := fmt.Sprintf("%s/%02d.meta.json", dir, n)
	for n > 0 {
		if _, err := fs.Stat(s.cfg.Recordings, metaPath); err == nil {
			break
		}
		n--
		metaPath = fmt.Sprintf("%s/%02d.meta.json", dir, n)
	}
	metaBytes, err := fs.ReadFile(s.cfg.Recordings, metaPath)
	if err != nil {
		return recording{}, err
	}
	var meta struct {
		Status       int    `json:"status"`
		ContentType  string `json:"response_content_type"`
		ResponseFile string `json:"response_file"`
	}
	if err := json.Unmarshal(metaBytes, &meta); err != nil {
		return recording{}, fmt.Errorf("reading %s: %w", dir, err)
	}
	body, err := fs.ReadFile(s.cfg.Recordings, dir+"/"+meta.ResponseFile)
	return recording{status: meta.Status, contentType: meta.ContentType, body: body}, err
}

func (s *Server) replay(w http.ResponseWriter, rec recording) {
	w.Header().Set("Content-Type", rec.contentType)
	if !strings.HasPrefix(rec.contentType, "text/event-stream") && !strings.HasPrefix(rec.contentType, "application/vnd.amazon.eventstream") {
		w.Header().Set("Content-Length", fmt.Sprint(len(rec.body)))
		w.WriteHeader(rec.status)
		w.Write(rec.body) //nolint:errcheck // the client went away
		return
	}
	w.WriteHeader(rec.status)
	flusher, _ := w.(http.Flusher)
	for _, piece := range s.pieces(rec.body) {
		if _, err := w.Write(piece); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if d := max(s.cfg.Delay, rec.delay); d > 0 {
			time.Sleep(d)
		}
	}
}

// pieces splits a stream into the writes the mock makes.
func (s *Server) pieces(body []byte) [][]byte {
	var out [][]byte
	for len(body) > 0 {
		n := s.cfg.ChunkSize
		if n <= 0 {
			if n = bytes.Index(body, []byte("\n\n")) + 2; n < 2 {
				n = len(body)
			}
		}
		n = min(n, len(body))
		out = append(out, body[:n])
		body = body[n:]
	}
	return out
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // the client went away
}

// countTokens serves Anthropic's count_tokens: a token per four bytes of
// the request's system prompt, tools and messages, the scripted model's
// own count.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Tools    json.RawMessage `json:"tools"`
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(requestBody(r), &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"count_tokens needs a model and messages"}}`)) //nolint:errcheck // the client left
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"input_tokens":%d}`, max(1, (len(req.System)+len(req.Tools)+len(req.Messages))/4))
}
