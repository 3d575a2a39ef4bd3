package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"modelgate/translate/api/spec"
)

// startDev runs `modelgate dev` in-process on free ports.
func startDev(t *testing.T, getenv func(string) string, extra ...string) devAddrs {
	t.Helper()
	a, _ := launchDev(t, getenv, io.Discard, append([]string{"--data-dir", t.TempDir()}, extra...)...)
	return a
}

// launchDev runs `modelgate dev` in-process on free ports with args, its
// log in logs; stop ends it as SIGTERM would and waits until it has.
func launchDev(t *testing.T, getenv func(string) string, logs io.Writer, args ...string) (a devAddrs, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan devAddrs, 1)
	done := make(chan error, 1)
	args = append([]string{"dev", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, args...)
	go func() {
		done <- run(ctx, args, env{getenv: getenv, stdout: io.Discard, stderr: logs, ready: func(a devAddrs) { ready <- a }})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dev ended with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a = <-ready:
	case err := <-done:
		once.Do(cancel) // it has ended: stop has nothing to wait for
		t.Fatalf("dev failed to start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not start")
	}
	return a, stop
}

// send makes a request with a bearer token and returns its status and
// body.
func send(t *testing.T, method, url, token, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// call sends a JSON request through the gateway with key.
func (a devAddrs) call(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	return send(t, method, a.Gateway+path, key, "application/json", body)
}

// admin calls the admin API with the admin token.
func (a devAddrs) admin(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	return send(t, method, a.Admin+path, a.AdminToken, "application/json", body)
}

// recorder keeps every response body the SDK reads, for schema checks.
type recorder struct {
	mu     sync.Mutex
	bodies []*bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	r.mu.Lock()
	r.bodies = append(r.bodies, buf)
	r.mu.Unlock()
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, buf), resp.Body}
	return resp, nil
}

func (r *recorder) last() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[len(r.bodies)-1].Bytes()
}

func client(a devAddrs, key string, rec *recorder) openai.Client {
	return openai.NewClient(option.WithBaseURL(a.Gateway), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: rec}))
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}
}

func TestDevWithOfficialClient(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()

	t.Run("list models", func(t *testing.T) {
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "ListModelsResponse", rec.last())
		if len(page.Data) < 2 || page.Data[0].ID != "gpt-4o-mini" || page.Data[0].Created == 0 {
			t.Errorf("models = %+v", page.Data)
		}
	})
	t.Run("chat completion", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if !strings.HasPrefix(resp.Choices[0].Message.Content, "Hi there!") || resp.Usage.TotalTokens != 385 {
			t.Errorf("completion = %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
		}
	})
	t.Run("stream without include_usage", func(t *testing.T) {
		text, usageChunks := stream(t, c, chatParams("gpt-4o-mini"))
		body := rec.last()
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", body)
		if usageChunks != 0 || bytes.Contains(body, []byte(`"usage"`)) || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
			t.Errorf("usage chunks %d, want none, and [DONE] last:\n%s", usageChunks, body)
		}
		// The gateway asked upstream for usage, so the mock replays the
		// recorded text stream with a usage chunk, which the gateway drops.
		if !strings.HasPrefix(text, "Hi there!") || strings.Count(string(body), "data: ") != 51 {
			t.Errorf("streamed text %q in %d events, want the recording's 50 chunks and [DONE]", text, strings.Count(string(body), "data: "))
		}
	})
	t.Run("stream with include_usage", func(t *testing.T) {
		p := chatParams("gpt-4o-mini")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		_, usageChunks := stream(t, c, p)
		body := rec.last()
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", body)
		events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
		if usageChunks != 1 || events[len(events)-1] != "data: [DONE]" || !strings.Contains(events[len(events)-2], `"choices":[],"usage":{`) {
			t.Errorf("want one usage chunk with choices [] just before [DONE]:\n%s", body)
		}
	})
	t.Run("broken upstream stream surfaces as an error", func(t *testing.T) {
		s := c.Chat.Completions.NewStreaming(ctx, chatParams("mock-truncated"))
		for s.Next() {
		}
		if s.Err() == nil {
			t.Error("stream ended without an error")
		}
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
	})
	t.Run("provider error", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, chatParams("mock-error-400"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" {
			t.Errorf("error = %v, want the provider's 400", err)
		}
		spec.ValidateT(t, "ErrorResponse", rec.last())
	})
	t.Run("bad key", func(t *testing.T) {
		bad := client(a, "sk-mg-wrong-key-000000000000000000", rec)
		_, err := bad.Models.List(ctx)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
			t.Errorf("error = %v, want 401 invalid_api_key", err)
		}
	})
	t.Run("anthropic backend", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("claude-sonnet"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if resp.Choices[0].Message.Content != "The capital of France is Paris." || resp.Usage.TotalTokens != 30 {
			t.Errorf("completion = %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
		}
		tools, err := c.Chat.Completions.New(ctx, chatParams("claude-tools"))
		if err != nil {
			t.Fatal(err)
		}
		if tc := tools.Choices[0].Message.ToolCalls; len(tc) != 4 || tc[0].Function.Arguments != `{"name":"Alice"}` || tools.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("tool calls = %+v", tools.Choices[0])
		}
		p := chatParams("claude-sonnet")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		text, usageChunks := stream(t, c, p)
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
		if !strings.Contains(text, "crossing streets.") || usageChunks != 1 {
			t.Errorf("streamed %q with %d usage chunks", text, usageChunks)
		}
		reqs := a.Mock.Requests()
		last := reqs[len(reqs)-1]
		if last.Path != "/v1/messages" || last.Header.Get("Authorization") != "" || last.Header.Get("X-Api-Key") == "" || last.Header.Get("Anthropic-Version") == "" {
			t.Errorf("upstream request = %s %v", last.Path, last.Header)
		}
	})
	t.Run("gemini backend", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("gemini-flash"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if resp.Choices[0].Message.Content != "Hello! How can I help you today?" || resp.Usage.TotalTokens != 52 {
			t.Errorf("completion = %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
		}
		p := chatParams("gemini-tools")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
		if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "get_capital" || tc[0].Function.Arguments != `{"country":"France"}` || acc.Usage.TotalTokens != 57 {
			t.Errorf("accumulated = %+v usage %+v", acc.Choices[0].Message, acc.Usage)
		}
	})
	t.Run("cohere backend", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("command-r"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if resp.Choices[0].Message.Content != "Hello! How can I assist you today?" || resp.Usage.TotalTokens != 507 {
			t.Errorf("completion = %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
		}
		p := chatParams("command-r")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		text, usageChunks := stream(t, c, p)
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
		if text != "Hello! How can I assist you today?" || usageChunks != 1 {
			t.Errorf("streamed %q with %d usage chunks", text, usageChunks)
		}
	})
	t.Run("bedrock backend", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("nova-micro"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if !strings.HasPrefix(resp.Choices[0].Message.Content, "Hello! How can I assist you today?") || resp.Usage.TotalTokens != 37 {
			t.Errorf("completion = %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
		}
		p := chatParams("nova-tools")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
		if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "get_temperature" || tc[0].Function.Arguments != `{"city":"Paris"}` || acc.Usage.TotalTokens != 562 {
			t.Errorf("accumulated = %+v usage %+v", acc.Choices[0].Message, acc.Usage)
		}
	})
	t.Run("azure backend", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("azure-gpt"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if !strings.HasPrefix(resp.Choices[0].Message.Content, "Hi there! How can I help today?") || resp.Usage.CompletionTokens != 271 {
			t.Errorf("completion = %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
		}
		reqs := a.Mock.Requests()
		last := reqs[len(reqs)-1]
		if last.Path != "/openai/deployments/gpt-5-nano/chat/completions" || last.Header.Get("Api-Key") == "" || last.Header.Get("Authorization") != "" {
			t.Errorf("upstream request = %s %v", last.Path, last.Header)
		}
	})
	t.Run("mistral backend (OpenAI-compatible quirks)", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("magistral"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if !strings.HasPrefix(resp.Choices[0].Message.Content, "Hello!") || resp.Usage.TotalTokens != 40 {
			t.Errorf("completion = %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
		}
		p := chatParams("magistral")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		text, usageChunks := stream(t, c, p)
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
		if !strings.Contains(text, "crossing.") || usageChunks != 1 {
			t.Errorf("streamed %q with %d usage chunks", text, usageChunks)
		}
		reqs := a.Mock.Requests()
		if last := string(reqs[len(reqs)-1].Body); strings.Contains(last, "stream_options") {
			t.Errorf("stream_options reached Mistral: %s", last)
		}
	})
	t.Run("vertex backend (service-account token flow)", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, chatParams("vertex-gemini"))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
		if !strings.Contains(resp.Choices[0].Message.Content, "Paris") {
			t.Errorf("completion = %q", resp.Choices[0].Message.Content)
		}
		p := chatParams("vertex-claude")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		text, usageChunks := stream(t, c, p)
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
		if !strings.Contains(text, "crossing streets.") || usageChunks != 1 {
			t.Errorf("streamed %q with %d usage chunks", text, usageChunks)
		}
		reqs := a.Mock.Requests()
		last := reqs[len(reqs)-1]
		minted := false
		for _, r := range reqs {
			minted = minted || r.Path == "/token" && strings.Contains(string(r.Body), "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer")
		}
		if !minted {
			t.Error("no JWT bearer grant reached the token endpoint")
		}
		if !strings.Contains(last.Path, "/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict") ||
			!strings.HasPrefix(last.Header.Get("Authorization"), "Bearer ") || strings.Contains(string(last.Body), `"model"`) {
			t.Errorf("upstream request = %s %v %s", last.Path, last.Header, last.Body)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(a.Admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{`modelgate_extproc_requests_total{endpoint="chat.completions",provider="openai",status="200"}`,
			`modelgate_extproc_tokens_total{endpoint="chat.completions",model="gpt-4o-mini",provider="openai",type="input"}`,
			"modelgate_extproc_time_to_first_token_seconds_bucket"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

func stream(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams) (string, int) {
	t.Helper()
	s := c.Chat.Completions.NewStreaming(context.Background(), p)
	var text strings.Builder
	usage := 0
	for s.Next() {
		chunk := s.Current()
		if len(chunk.Choices) > 0 {
			text.WriteString(chunk.Choices[0].Delta.Content)
		}
		if chunk.Usage.TotalTokens > 0 {
			usage++
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return text.String(), usage
}

func TestDevRegistersKeyFromEnvironment(t *testing.T) {
	const key = "sk-dev-scripted-key-0123456789"
	a := startDev(t, func(name string) string {
		if name == "MODELGATE_DEV_API_KEY" {
			return key
		}
		return ""
	})
	if a.APIKey != key {
		t.Fatalf("dev key = %q, want the one from the environment", a.APIKey)
	}
	c := client(a, key, &recorder{})
	if _, err := c.Models.List(context.Background()); err != nil {
		t.Errorf("listing models with the registered key: %v", err)
	}
	reqs := a.Mock.Requests()
	if len(reqs) != 0 {
		t.Errorf("the mock saw %d requests for a models listing", len(reqs))
	}
}
