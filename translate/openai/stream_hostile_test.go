package openai

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
)

// streamQuirks is every quirk set of the compatible family and plain
// OpenAI (the zero Quirks NewChat uses), by name, in a stable order.
func streamQuirks() ([]string, map[string]Quirks) {
	all := CompatibleProviders()
	all["openai"] = Quirks{}
	return slices.Sorted(maps.Keys(all)), all
}

// runQuirks plays chunks through the chat translator of q, recovering a
// panic as a test failure.
func runQuirks(t testing.TB, q Quirks, reqBody string, chunks [][]byte) (out []byte) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v\nupstream: %q", r, bytes.Join(chunks, nil))
		}
	}()
	out, _ = runQuirkStream(t, q, reqBody, chunks)
	return out
}

// streamReqM is streamReq for model m, which chunkWith's chunks name: for
// tests of repairs other than the model's.
var streamReqM = strings.Replace(streamReq, `"public"`, `"m"`, 1)

// chunkWith is a chunk whose choices member is choices.
func chunkWith(choices string) string {
	return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":` + choices + `}`
}

func choiceWith(delta string) string {
	return chunkWith(`[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":null}]`)
}

// Schema-breaking chunks are repaired into valid ones or end the stream
// with one error event, for every quirk set, never with a panic.
func TestStreamSchemaBreakingChunks(t *testing.T) {
	const (
		repaired = "repaired"
		failed   = "error"
	)
	tests := []struct {
		name  string
		chunk string
		want  string
		// mistral, where it differs (content parts)
		wantParts string
	}{
		{"choices null", chunkWith(`null`), repaired, ""},
		{"choices [null]", chunkWith(`[null]`), repaired, ""},
		{"choices [null, choice]", chunkWith(`[null,{"index":0,"delta":{"content":"x"},"finish_reason":null}]`), repaired, ""},
		{"choices [1]", chunkWith(`[1]`), failed, ""},
		{"choices [[]]", chunkWith(`[[]]`), failed, ""},
		{"choices string", chunkWith(`"x"`), failed, ""},
		{"choices object", chunkWith(`{}`), failed, ""},
		{"delta null", choiceWith(`null`), repaired, ""},
		{"delta string", choiceWith(`"x"`), failed, ""},
		{"delta number", choiceWith(`1`), failed, ""},
		{"delta array", choiceWith(`[]`), failed, ""},
		{"delta with escaped key", chunkWith(`[{"index":0,"delt\u0061":"x","finish_reason":null}]`), failed, ""},
		{"index string", chunkWith(`[{"index":"0","delta":{},"finish_reason":null}]`), failed, ""},
		{"index null", chunkWith(`[{"index":null,"delta":{},"finish_reason":null}]`), failed, ""},
		{"finish_reason number", chunkWith(`[{"index":0,"delta":{},"finish_reason":1}]`), failed, ""},
		{"logprobs string", chunkWith(`[{"index":0,"delta":{},"logprobs":"x","finish_reason":null}]`), failed, ""},
		{"usage string", chunkWith(`[]`)[:len(chunkWith(`[]`))-1] + `,"usage":"x"}`, failed, ""},
		{"usage array", chunkWith(`[]`)[:len(chunkWith(`[]`))-1] + `,"usage":[1]}`, failed, ""},
		{"usage count string", chunkWith(`[]`)[:len(chunkWith(`[]`))-1] + `,"usage":{"prompt_tokens":"1","completion_tokens":1,"total_tokens":2}}`, failed, ""},
		{"usage details string", chunkWith(`[]`)[:len(chunkWith(`[]`))-1] + `,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":"x"}}`, failed, ""},
		{"usage nulls", chunkWith(`[]`)[:len(chunkWith(`[]`))-1] + `,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null}}}`, repaired, ""},
		{"usage on a content chunk with nulls", choiceWith(`{"content":"x"}`)[:len(choiceWith(`{"content":"x"}`))-1] + `,"usage":{"prompt_tokens_details":null,"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, repaired, ""},
		{"tool_calls [null]", choiceWith(`{"tool_calls":[null]}`), repaired, ""},
		{"tool_calls [null, call]", choiceWith(`{"tool_calls":[null,{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]}`), repaired, ""},
		{"tool_calls [1]", choiceWith(`{"tool_calls":[1]}`), failed, ""},
		{"tool_calls string", choiceWith(`{"tool_calls":"x"}`), failed, ""},
		{"tool_calls object", choiceWith(`{"tool_calls":{}}`), failed, ""},
		{"tool call index null", choiceWith(`{"tool_calls":[{"index":null}]}`), repaired, ""},
		{"tool call index float", choiceWith(`{"tool_calls":[{"index":0.5}]}`), failed, ""},
		{"tool call nulls", choiceWith(`{"tool_calls":[{"id":null,"index":0,"type":null,"function":null}]}`), repaired, ""},
		{"tool call function nulls", choiceWith(`{"tool_calls":[{"index":0,"function":{"name":null,"arguments":null}}]}`), repaired, ""},
		{"tool call function string", choiceWith(`{"tool_calls":[{"index":0,"function":"f"}]}`), failed, ""},
		{"tool call arguments object", choiceWith(`{"tool_calls":[{"index":0,"function":{"arguments":{}}}]}`), failed, ""},
		{"tool call id number", choiceWith(`{"tool_calls":[{"index":0,"id":7}]}`), failed, ""},
		{"function_call array", choiceWith(`{"function_call":[]}`), failed, ""},
		{"role null and tool_calls null", choiceWith(`{"role":null,"content":"hi","tool_calls":null}`), repaired, ""},
		{"only nulls", choiceWith(`{"role":null,"tool_calls":null,"function_call":null}`), repaired, ""},
		{"role number", choiceWith(`{"role":1}`), failed, ""},
		{"content number", choiceWith(`{"content":1}`), failed, ""},
		{"content object", choiceWith(`{"content":{"text":"x"}}`), failed, ""},
		{"content parts", choiceWith(`{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"hm <"}]},{"type":"text","text":"a\"b"}]}`), failed, repaired},
		{"content parts of wrong shapes", choiceWith(`{"content":[null,1,"x",{"type":"text","text":7},{"type":"thinking","thinking":"x"}]}`), failed, repaired},
		{"content parts and reasoning", choiceWith(`{"reasoning_content":"a","content":[{"type":"thinking","thinking":[{"type":"text","text":"b"}]}]}`), failed, repaired},
		{"reasoning_content number", choiceWith(`{"reasoning_content":1}`), failed, ""},
		{"refusal object", choiceWith(`{"refusal":{}}`), failed, ""},
		{"id number", `{"id":1,"object":"chat.completion.chunk","created":1,"model":"m","choices":[]}`, failed, ""},
		{"created string", `{"id":"c","object":"chat.completion.chunk","created":"1","model":"m","choices":[]}`, failed, ""},
		{"Azure's prompt filter chunk", `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`, repaired, ""},
		{"top-level nulls first", `{"system_fingerprint":null,"service_tier":null,"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}`, repaired, ""},
		{"error null", `{"error":null,"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}`, repaired, ""},
		{"error number", `{"error":1}`, failed, ""},
		{"deeply nested unknown member", choiceWith(`{"content":"x","x":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`), repaired, ""},
		{"no choices", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m"}`, repaired, ""},
		{"no choices, usage", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, repaired, ""},
		{"not an object", `[{"choices":[]}]`, failed, ""},
		{"null", `null`, failed, ""},
		{"string", `"x"`, failed, ""},
	}
	names, quirks := streamQuirks()
	for _, tt := range tests {
		for _, provider := range names {
			want := tt.want
			if quirks[provider].ContentParts && tt.wantParts != "" {
				want = tt.wantParts
			}
			for _, usage := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/usage=%v", tt.name, provider, usage), func(t *testing.T) {
					req := streamReq + `}`
					if usage {
						req = streamReq + `,"stream_options":{"include_usage":true}}`
					}
					up := "data: " + tt.chunk + "\n\ndata: [DONE]\n\n"
					out := runQuirks(t, quirks[provider], req, [][]byte{[]byte(up)})
					spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
					events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
					errors := strings.Count(string(out), `data: {"error":`)
					switch want {
					case repaired:
						if errors != 0 || events[len(events)-1] != "data: [DONE]" {
							t.Errorf("want repaired chunks and [DONE], got:\n%s", out)
						}
					case failed:
						if errors != 1 || !strings.HasPrefix(events[len(events)-1], `data: {"error":`) {
							t.Errorf("want one error event, last, got:\n%s", out)
						}
					}
				})
			}
		}
	}
}

// Repairs edit the provider's bytes: what needs no repair keeps its order
// and spelling.
func TestStreamRepairKeepsOrder(t *testing.T) {
	tests := []struct {
		name, quirks, in, want string
	}{
		{"vllm nulls", "vllm",
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":"hi","tool_calls":null},"logprobs":null,"finish_reason":null,"stop_reason":null}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]}`},
		{"vendor members first and last", "openrouter",
			`{"provider":"Anthropic","id":"x","choices":[{"native_finish_reason":"end_turn","index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],"x_extra":{"a":[1]}}`,
			`{"id":"x","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`},
		{"leading nulls and spaces", "openai",
			`{ "a" : null , "id":"x", "choices" : [ null , { "delta" : { "role" : null , "content" : "<&>" } , "index" : 0 , "finish_reason" : null } ] }`,
			`{ "id":"x", "choices" : [ { "delta" : { "content" : "<&>" } , "index" : 0 , "finish_reason" : null } ] }`},
		{"all dropped", "groq",
			`{"choices":[null,null],"x":null}`,
			`{"choices":[]}`},
		{"no choices", "ollama",
			`{"id":"x","system_fingerprint":null}`,
			`{"id":"x","choices":[]}`},
		{"no choices, only nulls", "openai",
			`{"x":null} `,
			`{"choices":[]} `},
		{"mistral parts", "mistral",
			`{"id":"x","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"<hm>"}]},{"type":"text","text":"a\u00e9\n"}],"role":null},"finish_reason":null}]}`,
			`{"id":"x","choices":[{"index":0,"delta":{"content":"aé\n","reasoning_content":"<hm>"},"finish_reason":null}]}`},
	}
	_, quirks := streamQuirks()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := runQuirks(t, quirks[tt.quirks], streamReqM+`}`, [][]byte{[]byte("data: " + tt.in + "\n\n")})
			want := "data: " + tt.want + "\n\n"
			if got, _, _ := strings.Cut(string(out), "data: {\"error\""); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// An upstream event over the SSE decoder's limit ends the stream with one
// error event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	names, quirks := streamQuirks()
	head := []byte("data: " + choiceWith(`{"content":"x"}`) + "\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"")
	big := bytes.Repeat([]byte("a"), 1<<20)
	for _, provider := range names {
		req, _ := api.ParseChatRequest([]byte(streamReq + `}`))
		tr := NewCompatibleChat(quirks[provider])(translate.Target{Model: "m"}, req)
		tr.ResponseHeaders(200, "text/event-stream")
		out, _ := tr.ResponseBody(head, false)
		for range sse.DefaultMax>>20 + 1 {
			b, _ := tr.ResponseBody(big, false)
			out = append(out, b...)
		}
		b, _ := tr.ResponseBody([]byte("\"}}]}\n\ndata: [DONE]\n\n"), true)
		out = append(out, b...)
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
		events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
		if len(events) != 2 || !strings.Contains(events[1], StreamEventTooLarge) {
			t.Errorf("%s: got %d events, want a chunk and the error:\n%.300s", provider, len(events), out)
		}
	}
}

// A choice without the members the schema requires (index, delta,
// finish_reason) gets them, so that every chunk the client reads is valid.
func TestStreamChoiceRequiredMembers(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`: `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{}]}`:                                  `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[null,{"delta":null}]}`:                 `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"delta":{},"index":0,"finish_reason":null}]}`,
	} {
		var f chunkFix
		f.reset([]byte(in), false, false)
		members, _ := jsonscan.Members([]byte(in), nil)
		for _, m := range members {
			if string(m.Key) == "choices" {
				f.choices(m)
			}
		}
		if got := string(f.apply(nil)); got != want || f.bad != "" {
			t.Errorf("%s\n got %s (bad %q)\nwant %s", in, got, f.bad, want)
		}
	}
}

// A chunk names the model the client asked for, as the client wrote it:
// another id is replaced with every other byte kept, in the chunk and in
// the usage chunk split off Mistral's last one; the client's name, escaped
// or not, is left as it came.
func TestStreamModelIsTheClients(t *testing.T) {
	content := `[{"index":0,"delta":{"content":"a"},"finish_reason":null}]`
	for _, tt := range []struct{ name, in, want string }{
		{"another id", `{"id":"c","model":"m-2025" ,"choices":` + content + `}`, `{"id":"c","model":"public" ,"choices":` + content + `}`},
		{"the client's", `{"id":"c","model":"public","choices":` + content + `}`, `{"id":"c","model":"public","choices":` + content + `}`},
		{"the client's, escaped", `{"id":"c","model":"p\u0075blic","choices":` + content + `}`, `{"id":"c","model":"p\u0075blic","choices":` + content + `}`},
		{"nulls dropped too", `{"id":"c","model":"m","system_fingerprint":null,"choices":` + content + `}`, `{"id":"c","model":"public","choices":` + content + `}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := runQuirks(t, Quirks{}, streamReq+`}`, [][]byte{[]byte("data: " + tt.in + "\n\n")})
			if got, _, _ := strings.Cut(string(out), "data: {\"error\""); got != "data: "+tt.want+"\n\n" {
				t.Errorf("got  %s\nwant data: %s", got, tt.want)
			}
		})
	}
	escaped := strings.Replace(streamReq, `"public"`, `"p\u0075blic"`, 1) + `}`
	out := runQuirks(t, Quirks{}, escaped, [][]byte{[]byte("data: " + `{"id":"c","model":"m-2025","choices":` + content + `}` + "\n\n")})
	if !strings.HasPrefix(string(out), `data: {"id":"c","model":"p\u0075blic","choices":`) {
		t.Errorf("the client's model is not as the client wrote it: %s", out)
	}
	last := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"mistral-large-2411","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	out = runQuirks(t, CompatibleProviders()["mistral"], streamReq+`,"stream_options":{"include_usage":true}}`, [][]byte{[]byte("data: " + last + "\n\ndata: [DONE]\n\n")})
	if n := strings.Count(string(out), `"model":"public"`); n != 2 || strings.Contains(string(out), "mistral-large-2411") {
		t.Errorf("%d chunks name the client's model:\n%s", n, out)
	}
}
