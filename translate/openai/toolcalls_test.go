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
	"modelgate/translate/translatetest"
)

// mistralToolCompletion is a buffered answer in Mistral's shape: its
// message tool calls have an index but no type (OpenAI requires
// "type": "function"); one has "type": null, and the last is a custom
// tool's call, whose type is "custom".
const mistralToolCompletion = `{"id":"6a8b1c","object":"chat.completion","created":1782199134,"model":"mistral-large-latest",
"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","tool_calls":[
 {"id":"D681PevKs","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"},"index":0},
 {"id":"kT9wq2Lm1","type":null,"function":{"name":"get_weather","arguments":"{\"city\": \"Lyon\"}"},"index":1},
 {"id":"c3","type":"function","function":{"name":"get_time","arguments":"{}"}},
 {"id":"c4","custom":{"name":"grep","input":"x"}}]}}],
"usage":{"prompt_tokens":90,"total_tokens":120,"completion_tokens":30}}`

// Every provider's buffered tool calls get the type OpenAI requires.
func TestBufferedToolCallType(t *testing.T) {
	names, quirks := streamQuirks()
	for _, provider := range names {
		t.Run(provider, func(t *testing.T) {
			req, _ := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"weather?"}]}`))
			tr := NewCompatibleChat(quirks[provider])(translate.Target{Model: "m"}, req)
			tr.ResponseHeaders(200, "application/json")
			out, err := tr.ResponseBody([]byte(mistralToolCompletion), true)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", out)
			var got struct {
				Choices []struct {
					Message struct {
						ToolCalls []map[string]any `json:"tool_calls"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(out, &got); err != nil || len(got.Choices) != 1 {
				t.Fatalf("%v: %s", err, out)
			}
			var types []any
			for _, tc := range got.Choices[0].Message.ToolCalls {
				types = append(types, tc["type"])
			}
			if diff := cmp.Diff([]any{"function", "function", "function", "custom"}, types); diff != "" {
				t.Errorf("tool call types (-want +got):\n%s\n%s", diff, out)
			}
			if calls := got.Choices[0].Message.ToolCalls; calls[0]["id"] != "D681PevKs" || calls[1]["function"] == nil {
				t.Errorf("tool calls not kept: %s", out)
			}
		})
	}
}

// mistralToolStream is a stream in Mistral's shape: tool call deltas carry
// an id and the whole call but no index. Choice 1 has calls of its own.
var mistralToolStream = strings.Join([]string{
	choiceWith(`{"role":"assistant","content":""}`),
	// two calls in one delta: 0 and 1
	choiceWith(`{"tool_calls":[{"id":"D681PevKs","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"kT9wq2Lm1","function":{"name":"get_weather","arguments":""}}]}`),
	// no id, no index: continues the last call (1); a null index is none
	choiceWith(`{"tool_calls":[{"function":{"arguments":"{\"city\": "}}]}`),
	choiceWith(`{"tool_calls":[{"index":null,"id":null,"function":{"arguments":"\"Lyon\"}"}}]}`),
	// a known id keeps its index; a new one gets the next
	choiceWith(`{"tool_calls":[{"id":"D681PevKs","function":{"arguments":""}},{"id":"x3","function":{"name":"get_time","arguments":"{}"}}]}`),
	// choice 1 counts its own calls; an empty call object continues the last
	chunkWith(`[{"index":1,"delta":{"tool_calls":[{"id":"D681PevKs","function":{"name":"f","arguments":"{"}},{}]},"finish_reason":null}]`),
	chunkWith(`[{"index":1,"delta":{"tool_calls":[{"function":{"arguments":"}"}},{"id":"w","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]`),
	// an index the provider sent is kept, and later calls count from it
	choiceWith(`{"tool_calls":[{"index":7,"id":"y","function":{"name":"g","arguments":""}}]}`),
	choiceWith(`{"tool_calls":[{"function":{"arguments":"{}"}}]}`),
	choiceWith(`{"tool_calls":[{"id":"z","function":{"name":"h","arguments":"{}"}}]}`),
	chunkWith(`[{"index":0,"delta":{"content":""},"finish_reason":"tool_calls"}]`),
	"[DONE]",
}, "\n\n")

// The index of each tool call delta, in stream order, and its choice.
func toolCallIndexesOf(t *testing.T, stream []byte) []string {
	t.Helper()
	var got []string
	for _, ev := range strings.Split(strings.TrimSpace(string(stream)), "\n\n") {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					ToolCalls []struct {
						Index *int   `json:"index"`
						ID    string `json:"id"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		for _, ch := range chunk.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil {
					got = append(got, "missing")
					continue
				}
				got = append(got, strings.Repeat("c1:", ch.Index)+string(rune('0'+*tc.Index))+tc.ID)
			}
		}
	}
	return got
}

// Tool call deltas without an index get the index of their call, for every
// provider of the family, whatever the cuts of the stream.
func TestStreamToolCallIndex(t *testing.T) {
	up := []byte("data: " + strings.ReplaceAll(mistralToolStream, "\n\n", "\n\ndata: ") + "\n\n")
	want := []string{"0D681PevKs", "1kT9wq2Lm1", "1", "1", "0D681PevKs", "2x3", "c1:0D681PevKs", "c1:0", "c1:0", "c1:1w", "7y", "7", "8z"}
	names, quirks := streamQuirks()
	r := rand.New(rand.NewPCG(3, 5))
	for _, provider := range names {
		for _, usage := range []bool{false, true} {
			req := streamReq + `}`
			if usage {
				req = streamReq + `,"stream_options":{"include_usage":true}}`
			}
			out := runQuirks(t, quirks[provider], req, [][]byte{up})
			spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
			if diff := cmp.Diff(want, toolCallIndexesOf(t, out)); diff != "" {
				t.Errorf("%s: tool call indexes (-want +got):\n%s\n%s", provider, diff, out)
			}
			checkClientStream(t, provider, quirks[provider], usage, out)
			for range 5 {
				if got := runQuirks(t, quirks[provider], req, translatetest.RandomChunks(r, up, 64)); !bytes.Equal(got, out) {
					t.Fatalf("%s: a stream cut at random points gives other bytes:\n%s\nwant:\n%s", provider, got, out)
				}
			}
		}
	}
}

// The repair adds the index and leaves the provider's bytes otherwise as
// they were.
func TestStreamToolCallIndexBytes(t *testing.T) {
	in := choiceWith(`{"tool_calls":[{"id":"a","function":{"name":"f","arguments":""}}, {"id":null,"id":"b"} ,{"function":{"arguments":"{}"},"id":null}]}`)
	want := choiceWith(`{"tool_calls":[{"id":"a","function":{"name":"f","arguments":""},"index":0}, {"id":"b","index":1} ,{"function":{"arguments":"{}"},"index":1}]}`)
	out := runQuirks(t, CompatibleProviders()["mistral"], streamReqM+`}`, [][]byte{[]byte("data: " + in + "\n\n")})
	if got, _, _ := strings.Cut(string(out), "data: {\"error\""); got != "data: "+want+"\n\n" {
		t.Errorf("got  %s\nwant data: %s", got, want)
	}
}

// Tool call deltas that need no repair (OpenAI's, with their index) cost
// no more allocations than a content chunk: the index state is touched
// only by the repair.
func TestStreamNoRepairAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; run without -race (BenchmarkStreamChunk* report the same)")
	}
	req, _ := api.ParseChatRequest([]byte(streamReqM + `}`))
	allocs := func(chunk string) float64 {
		tr := NewChat(translate.Target{Model: "m"}, req)
		tr.ResponseHeaders(200, "text/event-stream")
		in := []byte(chunk)
		tr.ResponseBody(in, false) //nolint:errcheck // warms the scratch buffers
		return testing.AllocsPerRun(100, func() {
			if out, _ := tr.ResponseBody(in, false); !bytes.Equal(out, in) {
				t.Fatalf("repaired %s into %s", in, out)
			}
		})
	}
	base := allocs(strings.Replace(benchChunks[1].chunk, `"Qwen/Qwen3-8B"`, `"m"`, 1)) // the client's model
	for _, chunk := range []string{
		"data: " + choiceWith(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`) + "\n\n",
		"data: " + choiceWith(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`) + "\n\n",
		"data: " + chunkWith(`[{"index":2,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]},"finish_reason":null}]`) + "\n\n",
	} {
		if n := allocs(chunk); n > base {
			t.Errorf("%.0f allocations (a content chunk: %.0f) for %s", n, base, chunk)
		}
	}
}
