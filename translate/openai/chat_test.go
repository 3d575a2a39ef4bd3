package openai

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

const recorded = "../../testdata/fixtures/openai/"

func newChat(t testing.TB, body string) translate.Translator {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("ParseChatRequest: %v", err)
	}
	return NewChat(translate.Target{Backend: "b", Provider: "openai", Model: "gpt-5-nano", BasePath: "/openai", APIKey: "sk-provider"}, req)
}

const streamReq = `{"model":"public","messages":[{"role":"user","content":"Hello!"}],"stream":true`

func TestRequestBody(t *testing.T) {
	tr := newChat(t, streamReq+`,"stream_options":{"x":1},"seed":7}`)
	up, err := tr.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(up.Body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"model": "gpt-5-nano", "stream": true, "seed": 7.0,
		"stream_options": map[string]any{"x": 1.0, "include_usage": true},
		"messages":       []any{map[string]any{"role": "user", "content": "Hello!"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream body (-want +got):\n%s", diff)
	}
	if up.Path != "/openai/v1/chat/completions" {
		t.Errorf("path = %q", up.Path)
	}
	wantHeaders := []translate.Header{{Name: "content-type", Value: "application/json"}, {Name: "authorization", Value: "Bearer sk-provider"}}
	if diff := cmp.Diff(wantHeaders, up.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

func TestBufferedCompletion(t *testing.T) {
	tr := newChat(t, `{"model":"public","messages":[{"role":"user","content":"Hello!"}]}`)
	head := tr.ResponseHeaders(200, "application/json")
	if head.Stream || head.ContentType != "application/json" || head.Status != 200 {
		t.Errorf("head = %+v", head)
	}
	out, err := tr.ResponseBody(translatetest.ReadFile(t, recorded+"chat/chat-basic.bodies/00.response.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	want := translate.Usage{PromptTokens: 8, CompletionTokens: 377, TotalTokens: 385, ReasoningTokens: 320}
	if diff := cmp.Diff(want, tr.Usage()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	var got struct{ Model string }
	if err := json.Unmarshal(out, &got); err != nil || got.Model != "public" { // not gpt-5-nano-2025-08-07
		t.Errorf("the answer does not name the client's model (%v): %s", err, out)
	}
}

func TestBufferedNotJSON(t *testing.T) {
	tr := newChat(t, `{"model":"public","messages":[{"role":"user"}]}`)
	tr.ResponseHeaders(200, "application/json")
	if _, err := tr.ResponseBody([]byte("<html>"), true); err == nil {
		t.Error("ResponseBody(html) error = nil, want an error")
	}
}

func TestProviderErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"openai error kept", 400, string(translatetest.ReadFile(t, recorded+"errors/chat-bad-request.bodies/00.response.json")),
			`{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`},
		{"html wrapped", 502, "<html>bad gateway</html>",
			`{"error":{"message":"The provider returned HTTP 502 Bad Gateway.","type":"server_error","param":null,"code":null}}`},
		{"text wrapped", 429, "slow down",
			`{"error":{"message":"The provider returned HTTP 429 Too Many Requests: slow down","type":"rate_limit_error","param":null,"code":null}}`},
		{"numeric code", 422, `{"error":{"message":"nope","code":422}}`,
			`{"error":{"message":"nope","type":"invalid_request_error","param":null,"code":"422"}}`},
		{"string error", 404, `{"error":"no such thing"}`,
			`{"error":{"message":"no such thing","type":"invalid_request_error","param":null,"code":null}}`},
		{"provider refused the gateway's key", 401, `{"error":{"message":"Incorrect API key provided: sk-proj-****abcd","type":"invalid_request_error","code":"invalid_api_key"}}`,
			`{"error":{"message":"The provider rejected the gateway's credentials for this backend.","type":"server_error","param":null,"code":"provider_authentication_failed"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newChat(t, streamReq+`}`)
			head := tr.ResponseHeaders(tt.status, "text/html")
			if head.Stream || head.Status != api.ClientStatus(tt.status) || head.ContentType != "application/json" {
				t.Errorf("head = %+v", head)
			}
			out, err := tr.ResponseBody([]byte(tt.body), true)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got  %s\nwant %s", out, tt.want)
			}
			spec.ValidateT(t, "ErrorResponse", out)
		})
	}
}

// runStream feeds upstream to a new stream translator in the given chunks,
// with Envoy's empty end-of-stream chunk last.
func runStream(t testing.TB, reqBody string, chunks [][]byte) ([]byte, translate.Usage) {
	t.Helper()
	tr := newChat(t, reqBody)
	if head := tr.ResponseHeaders(200, "text/event-stream; charset=utf-8"); !head.Stream {
		t.Fatalf("head = %+v, want a stream", head)
	}
	var out []byte
	for _, c := range chunks {
		b, err := tr.ResponseBody(c, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	b, err := tr.ResponseBody(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, b...), tr.Usage()
}

func TestStreamUsage(t *testing.T) {
	upstream := translatetest.ReadFile(t, recorded+"chat/chat-streaming-detailed-usage.bodies/00.response.sse")
	wantUsage := translate.Usage{PromptTokens: 12, CompletionTokens: 100, TotalTokens: 112, ReasoningTokens: 100}
	t.Run("client did not ask", func(t *testing.T) {
		out, usage := runStream(t, streamReq+`}`, [][]byte{upstream})
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
		if bytes.Contains(out, []byte(`"usage"`)) {
			t.Errorf("usage reached a client that did not ask:\n%s", out)
		}
		if got := strings.Count(string(out), "data: "); got != 3 { // two chunks and [DONE]
			t.Errorf("%d events, want 3:\n%s", got, out)
		}
		if diff := cmp.Diff(wantUsage, usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})
	t.Run("client asked", func(t *testing.T) {
		out, usage := runStream(t, streamReq+`,"stream_options":{"include_usage":true}}`, [][]byte{upstream})
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
		if !bytes.Contains(out, []byte(`"choices":[],"usage":{"prompt_tokens":12`)) || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
			t.Errorf("want the usage chunk then [DONE]:\n%s", out)
		}
		if diff := cmp.Diff(wantUsage, usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})
}

func TestStreamBrokenUpstream(t *testing.T) {
	upstream := translatetest.ReadFile(t, recorded+"chat/chat-streaming.bodies/00.response.sse")
	tests := map[string][]byte{
		"cut mid-event":   upstream[:len(upstream)/2],
		"no [DONE]":       bytes.TrimSuffix(upstream, []byte("data: [DONE]\n\n")),
		"not json":        []byte("data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[]}\n\ndata: oops\n\n"),
		"upstream error ": []byte("data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"),
	}
	for name, up := range tests {
		t.Run(name, func(t *testing.T) {
			out, _ := runStream(t, streamReq+`}`, [][]byte{up})
			spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
			events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
			last := events[len(events)-1]
			if !strings.HasPrefix(last, `data: {"error":{`) {
				t.Errorf("last event = %q, want an error event", last)
			}
		})
	}
}

func crlf(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }

// Any split of the upstream stream gives byte-identical client output,
// including splits inside ’ (3 bytes) and between \r and \n.
func TestStreamAnySplitIsByteIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, file := range []string{"chat/chat-streaming.bodies/00.response.sse", "chat/chat-streaming-detailed-usage.bodies/00.response.sse"} {
		for _, variant := range [][]byte{translatetest.ReadFile(t, recorded+file), crlf(translatetest.ReadFile(t, recorded+file))} {
			for _, req := range []string{streamReq + `}`, streamReq + `,"stream_options":{"include_usage":true}}`} {
				whole, _ := runStream(t, req, [][]byte{variant})
				for range 20 {
					got, _ := runStream(t, req, translatetest.RandomChunks(r, variant, 64))
					if !bytes.Equal(whole, got) {
						t.Fatalf("%s: split output differs\nwhole: %q\nsplit: %q", file, whole, got)
					}
				}
				// Every byte its own chunk: cuts inside every UTF-8 character and CRLF.
				var single [][]byte
				for i := range variant {
					single = append(single, variant[i:i+1])
				}
				if got, _ := runStream(t, req, single); !bytes.Equal(whole, got) {
					t.Fatalf("%s: byte-by-byte output differs", file)
				}
			}
		}
	}
}

// Whatever a provider streams, cut anywhere, every quirk set's translator
// (and plain OpenAI's) gives the same output for any split, never panics,
// and emits chunks that need no further repair, at most one error event
// (last) and nothing after [DONE].
func FuzzStreamSplit(f *testing.F) {
	f.Add(translatetest.ReadFile(f, recorded+"chat/chat-streaming-detailed-usage.bodies/00.response.sse")[:600], uint64(1), false)
	f.Add([]byte("data: {\"choices\":[],\"usage\":null}\r\n\r\ndata: [DONE]\r\n\r\n"), uint64(2), true)
	f.Add([]byte("data: {\"choices\":[null,{\"index\":0,\"delta\":{\"role\":null,\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"tool_calls\":[null]},\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":1,\"prompt_tokens_details\":null}}\n\ndata: [DONE]\n\n"), uint64(3), true)
	f.Add([]byte("data: {\"choices\":[{\"delta\":null},1]}\n\n"), uint64(4), false)
	f.Add([]byte("data: {\"choices\":[{\"index\":1,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\"}},{\"index\":null}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\"},{\"index\":3},{}]}}]}\n\n"), uint64(5), true)
	names, quirks := streamQuirks()
	f.Fuzz(func(t *testing.T, upstream []byte, seed uint64, includeUsage bool) {
		for _, provider := range names {
			for _, usage := range []bool{includeUsage, !includeUsage} {
				req := streamReq + `}`
				if usage {
					req = streamReq + `,"stream_options":{"include_usage":true}}`
				}
				whole, _ := runQuirkStream(t, quirks[provider], req, [][]byte{upstream})
				got, _ := runQuirkStream(t, quirks[provider], req, translatetest.RandomChunks(rand.New(rand.NewPCG(seed, seed)), upstream, 64))
				if !bytes.Equal(whole, got) {
					t.Fatalf("%s: split output differs\nwhole: %q\nsplit: %q", provider, whole, got)
				}
				checkClientStream(t, provider, quirks[provider], usage, whole)
			}
		}
	})
}

// checkClientStream checks what a chat translator sent a client: whole
// events, chunks that are JSON objects needing no repair, [DONE] or one
// error event last.
func checkClientStream(t *testing.T, provider string, q Quirks, includeUsage bool, out []byte) {
	t.Helper()
	var dec sse.Decoder
	events := dec.Feed(out)
	if dec.Pending() || len(events) == 0 {
		t.Fatalf("%s: partial or empty output %q", provider, out)
	}
	fix := chunkFix{model: "public"} // streamReq's: a chunk naming another needs repair
	for i, ev := range events {
		last := i == len(events)-1
		if string(ev.Data) == "[DONE]" {
			if !last {
				t.Fatalf("%s: [DONE] is event %d of %d", provider, i, len(events))
			}
			continue
		}
		members, ok := jsonscan.Members(ev.Data, nil)
		if !json.Valid(ev.Data) || !ok {
			t.Fatalf("%s: event %d is not a JSON object: %q", provider, i, ev.Data)
		}
		if _, isErr := find(members, "error"); isErr {
			if !last {
				t.Fatalf("%s: error event %d of %d", provider, i, len(events))
			}
			continue
		}
		if _, ok := find(members, "choices"); !ok {
			t.Fatalf("%s: chunk without choices: %s", provider, ev.Data)
		}
		fix.reset(ev.Data, q.ContentParts, false)
		for _, m := range members {
			switch string(m.Key) {
			case "choices":
				fix.choices(m)
			case "usage":
				if !includeUsage {
					t.Fatalf("%s: usage reached a client that did not ask: %s", provider, ev.Data)
				}
				if u, err := api.ParseUsage(m.Value); !jsonscan.IsNull(m.Value) && (err != nil || string(m.Value) != string(must(json.Marshal(u)))) {
					t.Fatalf("%s: usage is not in the one shape: %s", provider, m.Value)
				}
			default:
				if jsonscan.IsNull(m.Value) {
					t.Fatalf("%s: null %s left in %s", provider, m.Key, ev.Data)
				}
				fix.top(m)
			}
		}
		if fix.bad != "" || len(fix.edits) != 0 {
			t.Fatalf("%s: chunk needs repair (%q, %d edits): %s", provider, fix.bad, len(fix.edits), ev.Data)
		}
	}
}

func BenchmarkRequestBody(b *testing.B) {
	body := translatetest.ReadFile(b, recorded+"chat/chat-streaming-detailed-usage.bodies/00.request.json")
	b.ReportAllocs()
	for b.Loop() {
		req, err := api.ParseChatRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := NewChat(translate.Target{Model: "m"}, req).RequestBody(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStream200Chunks(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp","object":"chat.completion.chunk","created":1755137933,"model":"gpt-5-nano-2025-08-07","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],"usage":null,"obfuscation":"LcdzdJdMMgDHt6"}` + "\n\n")
	req, _ := api.ParseChatRequest([]byte(streamReq + `}`))
	b.ReportAllocs()
	for b.Loop() {
		tr := NewChat(translate.Target{Model: "m"}, req)
		tr.ResponseHeaders(200, "text/event-stream")
		for range 200 {
			if _, err := tr.ResponseBody(chunk, false); err != nil {
				b.Fatal(err)
			}
		}
		tr.ResponseBody([]byte("data: [DONE]\n\n"), true) //nolint:errcheck
	}
}

func FuzzNormalizeError(f *testing.F) {
	f.Add(400, []byte(`{"error":{"message":"m","type":"t","param":"p","code":7}}`))
	f.Add(503, []byte("<html>"))
	f.Add(429, []byte(`{"error":"slow"}`))
	f.Add(500, []byte(`{"error":{"message":"","param":"","code":null}}`))
	f.Add(529, []byte("<!DOCTYPE html><html><head><title>Overloaded &amp; busy</title></head></html>"))
	f.Add(404, []byte(`{"detail":"Not Found"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		// The message is never empty and bounded; param and code are
		// null or a non-empty string, never "".
		translatetest.CheckErrorBody(t, api.NormalizeError(status, body), api.MaxErrorMessage+len("…"))
	})
}

func TestClientStatus(t *testing.T) {
	for in, want := range map[int]int{400: 400, 401: 502, 403: 502, 404: 404, 429: 429, 500: 500, 503: 503, 302: 502, 101: 502} {
		if got := api.ClientStatus(in); got != want {
			t.Errorf("ClientStatus(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestContextLengthCode(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":null}}`,
		`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`,
	} {
		out := api.NormalizeError(400, []byte(body))
		if !bytes.Contains(out, []byte(`"code":"context_length_exceeded"`)) {
			t.Errorf("NormalizeError(%s) = %s", body, out)
		}
	}
	if out := api.NormalizeError(400, []byte(`{"error":{"message":"bad temperature","type":"invalid_request_error"}}`)); bytes.Contains(out, []byte("context_length")) {
		t.Errorf("unrelated error marked: %s", out)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The upstream body is the client's, edited where its model and
// stream_options are, wherever they are and however they are written.
func TestEditRequest(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"Hello!"}]`
	tests := []struct{ model, body, want string }{
		{"gpt-5-nano", `{"model":"public",` + msgs + `}`, `{"model":"gpt-5-nano",` + msgs + `}`},
		{"public", `{"model":"public",` + msgs + `}`, `{"model":"public",` + msgs + `}`},
		{"a<b>&\"c\u2028", `{ "mod\u0065l" : "public" ,` + msgs + ` }`, `{ "mod\u0065l" : "a\u003cb\u003e\u0026\"c\u2028" ,` + msgs + ` }`},
		{"m", `{"stream_options":{"x":1},"stream":true,` + msgs + `,"model":"public"}`,
			`{"stream_options":{"x":1,"include_usage":true},"stream":true,` + msgs + `,"model":"m"}`},
		{"m", `{"model":"public","stream":true,` + msgs + `,"stream_options":{"include_usage":false}}`,
			`{"model":"m","stream":true,` + msgs + `,"stream_options":{"include_usage":true}}`},
		{"m", `{"model":"public","stream":true,"stream_options":null,` + msgs + `}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`},
		{"m", `{"model":"public","stream":true,` + msgs + "}\n", `{"model":"m","stream":true,` + msgs + `,"stream_options":{"include_usage":true}}` + "\n"},
		{"m", `{"model":"public","stream":false,"stream_options":null,` + msgs + `}`, `{"model":"m","stream":false,"stream_options":null,` + msgs + `}`},
	}
	for _, tt := range tests {
		req, err := api.ParseChatRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("ParseChatRequest(%s): %v", tt.body, err)
		}
		up, err := NewChat(translate.Target{Model: tt.model}, req).RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		if string(up.Body) != tt.want {
			t.Errorf("RequestBody(%s) to %q:\ngot  %s\nwant %s", tt.body, tt.model, up.Body, tt.want)
		}
	}
}

// The edit at the members api.ParseChatRequest found is the one a walk
// of the body makes, for any request and model.
func FuzzEditRequest(f *testing.F) {
	f.Add([]byte(streamReq+`,"stream_options":{"x":1},"seed":7}`), "gpt-5-nano")
	f.Add([]byte(`{"stream_options":{},"stream":true,"messages":[{"role":"user"}],"model":"m"}`), "a<\u2028\xff")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user"}]}`), "m")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		req, err := api.ParseChatRequest(body)
		if err != nil || req.Body == nil {
			t.Skip()
		}
		got, err := (&chat{target: translate.Target{Model: model}, req: req}).editRequest()
		want, wantErr := walkEditRequest(req, model)
		if (err != nil) != (wantErr != nil) || string(got) != string(want) {
			t.Fatalf("editRequest(%s, %q) = %s, %v\nwant %s, %v", body, model, got, err, want, wantErr)
		}
	})
}

// walkEditRequest is editRequest as it was, walking the body for the
// members it edits.
func walkEditRequest(req *api.ChatRequest, model string) ([]byte, error) {
	quoted, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	body := req.Body
	members, _ := jsonscan.Members(body, nil)
	var out []byte
	prev, hasOptions := 0, false
	for _, m := range members {
		v := quoted
		switch string(name(m.Key)) {
		case "model":
		case "stream_options":
			if !req.Stream {
				continue
			}
			if v, err = withIncludeUsage(m.Value); err != nil {
				return nil, err
			}
			hasOptions = true
		default:
			continue
		}
		out = append(append(out, body[prev:m.VS]...), v...)
		prev = m.End
	}
	end := bytes.LastIndexByte(body, '}')
	out = append(out, body[prev:end]...)
	if req.Stream && !hasOptions {
		out = append(out, `,"stream_options":{"include_usage":true}`...)
	}
	return append(out, body[end:]...), nil
}
