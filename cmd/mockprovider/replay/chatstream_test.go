package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate/sse"
)

// chunk is a chat.completion.chunk as a client reads it.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      *string `json:"role"`
			Content   *string `json:"content"`
			Reasoning *string `json:"reasoning"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string  `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`

	members map[string]json.RawMessage
	raw     []byte
}

// call is a tool call as a client has it once the stream is read.
type call struct{ ID, Type, Name, Arguments string }

// streamed is what a client reads from a chat stream.
type streamed struct {
	chunks             []chunk
	content, reasoning string
	calls              []call
	finish             string
}

// readStream parses an SSE chat stream: every event a chunk of one
// completion, then data: [DONE].
func readStream(t *testing.T, resp *http.Response) streamed {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s, want 200 and an event stream:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var dec sse.Decoder
	events := dec.Feed(body)
	if len(events) < 2 || string(events[len(events)-1].Data) != "[DONE]" || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("want chunks and data: [DONE] last:\n%s", body)
	}
	var s streamed
	for _, ev := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		json.Unmarshal(ev.Data, &c.members) //nolint:errcheck // just decoded
		c.raw = bytes.Clone(ev.Data)
		if c.Object != "chat.completion.chunk" || c.ID == "" || (len(s.chunks) > 0 && c.ID != s.chunks[0].ID) {
			t.Errorf("event %s: want a chat.completion.chunk of the stream's id", ev.Data)
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.Content != nil {
				s.content += *d.Content
			}
			if d.Reasoning != nil {
				s.reasoning += *d.Reasoning
			}
			for _, tc := range d.ToolCalls {
				if tc.Index == nil || *tc.Index > len(s.calls) {
					t.Fatalf("event %s: a tool call without its index, or out of order", ev.Data)
				}
				if *tc.Index == len(s.calls) {
					s.calls = append(s.calls, call{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name})
				}
				if tc.Function.Arguments != nil {
					s.calls[*tc.Index].Arguments += *tc.Function.Arguments
				}
			}
			if ch.FinishReason != nil {
				s.finish = *ch.FinishReason
			}
		}
		s.chunks = append(s.chunks, c)
	}
	return s
}

// checkUsage: a stream has a usage chunk (no choices, just before [DONE])
// and "usage":null on every other chunk exactly when the request asked
// for stream_options.include_usage, as OpenAI's streams do.
func checkUsage(t *testing.T, s streamed, includeUsage bool) {
	t.Helper()
	for i, c := range s.chunks {
		raw, has := c.members["usage"]
		last := i == len(s.chunks)-1
		switch {
		case !includeUsage && has:
			t.Errorf("chunk %s has usage, which the request did not ask for", c.raw)
		case includeUsage && last && (len(c.Choices) != 0 || c.Usage == nil || c.Usage.TotalTokens == 0):
			t.Errorf("last chunk %s: want the usage chunk, without choices", c.raw)
		case includeUsage && !last && (!has || string(raw) != "null"):
			t.Errorf("chunk %s: want \"usage\":null before the usage chunk", c.raw)
		}
	}
}

// completionOf reads the JSON answer a model gives to a request without
// "stream".
func completionOf(t *testing.T, url, model string) (content, reasoning string, calls []call, finish string) {
	t.Helper()
	var c struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string `json:"content"`
				Reasoning string  `json:"reasoning"`
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	resp := post(t, url, "", `{"model":"`+model+`"}`)
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 {
		t.Fatalf("JSON answer of %s: %d %v", model, resp.StatusCode, err)
	}
	m := c.Choices[0].Message
	for _, tc := range m.ToolCalls {
		calls = append(calls, call{tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments})
	}
	if m.Content != nil {
		content = *m.Content
	}
	return content, m.Reasoning, calls, c.Choices[0].FinishReason
}

// recordedStreamText joins the text a recorded chat stream carries.
func recordedStreamText(t *testing.T, file string) string {
	t.Helper()
	var dec sse.Decoder
	var text strings.Builder
	for _, ev := range dec.Feed(recorded(t, file)) {
		var c chunk
		if json.Unmarshal(ev.Data, &c) == nil && len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
			text.WriteString(*c.Choices[0].Delta.Content)
		}
	}
	return text.String()
}

// The tool call of mock-tools, recorded only as JSON, streams when the
// request asks: a first chunk with the role and the call's id, type and
// name with empty arguments, the arguments in pieces under the call's
// index, a chunk with finish_reason "tool_calls", and the usage chunk
// when asked for; the name and joined arguments are the JSON answer's.
// On Azure's deployment path too.
func TestToolCallStreams(t *testing.T) {
	_, ts := start(t, Config{})
	_, _, want, _ := completionOf(t, ts.URL, "mock-tools")
	if len(want) != 1 || want[0].Name != "get_current_weather" || want[0].Arguments == "" {
		t.Fatalf("JSON tool calls = %+v", want)
	}
	for _, path := range []string{"/v1/chat/completions", "/openai/deployments/d/chat/completions?api-version=2024-10-21"} {
		for _, includeUsage := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s include_usage=%v", path, includeUsage), func(t *testing.T) {
				body := fmt.Sprintf(`{"model":"mock-tools","stream":true,"stream_options":{"include_usage":%v}}`, includeUsage)
				resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				s := readStream(t, resp)
				if diff := cmp.Diff(want, s.calls); diff != "" || s.finish != "tool_calls" || s.content != "" {
					t.Errorf("streamed tool calls (-JSON +stream):\n%s\nfinish %q, content %q", diff, s.finish, s.content)
				}
				checkUsage(t, s, includeUsage)

				first := s.chunks[0].Choices[0].Delta
				if first.Role == nil || *first.Role != "assistant" || len(first.ToolCalls) != 1 ||
					first.ToolCalls[0].ID != want[0].ID || first.ToolCalls[0].Type != "function" ||
					first.ToolCalls[0].Function.Name != want[0].Name || first.ToolCalls[0].Function.Arguments == nil || *first.ToolCalls[0].Function.Arguments != "" {
					t.Errorf("first chunk %s: want the role and the call's id, type and name with empty arguments", s.chunks[0].raw)
				}
				end := len(s.chunks)
				if includeUsage {
					end--
				}
				pieces := s.chunks[1 : end-1]
				if len(pieces) < 2 {
					t.Errorf("arguments in %d pieces, want them in several", len(pieces))
				}
				for _, c := range pieces {
					tc := c.Choices[0].Delta.ToolCalls
					if len(tc) != 1 || *tc[0].Index != 0 || tc[0].ID != "" || tc[0].Function.Name != "" || tc[0].Function.Arguments == nil || c.Choices[0].FinishReason != nil {
						t.Errorf("chunk %s: want only an arguments piece of call 0", c.raw)
					}
				}
				if fin := s.chunks[end-1]; len(fin.Choices) != 1 || fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "tool_calls" ||
					!strings.Contains(string(fin.raw), `"delta":{}`) {
					t.Errorf("chunk %s: want an empty delta with finish_reason tool_calls", fin.raw)
				}
			})
		}
	}
}

// Every OpenAI chat model streams when asked, with the content or tool
// call it answers as JSON (or its recorded stream's), and errors stay JSON
// as OpenAI sends them. (Mistral's recorded stream, in Mistral's format,
// is the translator's business.)
func TestEveryChatModelStreams(t *testing.T) {
	_, ts := start(t, Config{})
	ollamaText, ollamaReasoning, _, _ := completionOf(t, ts.URL, "mock-ollama")
	text := recordedStreamText(t, "openai/chat/chat-streaming.bodies/00.response.sse")
	if !strings.HasPrefix(text, "Hi there!") {
		t.Fatalf("recorded text %q", text)
	}
	tests := []struct {
		model, content, reasoning, call string
		usageAlways                     bool // the recording has usage whatever the request
	}{
		{model: "gpt-4o-mini", content: text}, // the README's Quickstart
		{model: "gpt-4o", content: text},
		{model: "mock-tools", call: "get_current_weather"},
		{model: "mock-ollama", content: ollamaText, reasoning: ollamaReasoning},
		{model: "mock-roundtrip", call: "get_capital", usageAlways: true},
		{model: "mock-slow", usageAlways: true},
	}
	for _, tt := range tests {
		for _, includeUsage := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s include_usage=%v", tt.model, includeUsage), func(t *testing.T) {
				s := readStream(t, post(t, ts.URL, "", fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":%v}}`, tt.model, includeUsage)))
				if !tt.usageAlways {
					checkUsage(t, s, includeUsage)
				}
				if tt.content != "" && s.content != tt.content {
					t.Errorf("streamed text %q, want %q", s.content, tt.content)
				}
				if s.reasoning != tt.reasoning {
					t.Errorf("streamed reasoning %q, want %q", s.reasoning, tt.reasoning)
				}
				if tt.call != "" && (len(s.calls) != 1 || s.calls[0].Name != tt.call || !json.Valid([]byte(s.calls[0].Arguments))) {
					t.Errorf("streamed tool calls %+v, want one call of %s", s.calls, tt.call)
				}
				if tt.model == "mock-ollama" && (len(s.chunks) < 10 || s.finish != "stop") {
					t.Errorf("%d chunks, finish %q: want the text in pieces and finish_reason stop", len(s.chunks), s.finish)
				}
			})
		}
	}
	for _, model := range []string{"mock-error-400", "mock-error-404"} {
		resp := post(t, ts.URL, "", `{"model":"`+model+`","stream":true}`)
		if resp.StatusCode < 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s streamed: %d %s, want its JSON error", model, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// A stream request with stream_options.include_usage gets the recorded
// text stream, each chunk as recorded with "usage":null after its choices,
// and the recorded usage chunk of chat-streaming-detailed-usage given the
// stream's id and created.
func TestTextStreamWithUsageReplaysRecordings(t *testing.T) {
	_, ts := start(t, Config{})
	s := readStream(t, post(t, ts.URL, "", `{"model":"x","stream":true,"stream_options":{"include_usage":true}}`))
	var dec sse.Decoder
	text := dec.Feed(recorded(t, "openai/chat/chat-streaming.bodies/00.response.sse"))
	if len(s.chunks) != len(text) { // the text's chunks and [DONE], the usage chunk and [DONE]
		t.Fatalf("%d chunks, want the %d recorded and the usage chunk", len(s.chunks), len(text)-1)
	}
	for i, ev := range text[:len(text)-1] {
		if got := bytes.Replace(s.chunks[i].raw, []byte(`],"usage":null,`), []byte(`],`), 1); !bytes.Equal(got, ev.Data) {
			t.Errorf("chunk %d = %s\nwant the recorded %s with \"usage\":null", i, s.chunks[i].raw, ev.Data)
		}
	}
	dec = sse.Decoder{}
	withUsage := dec.Feed(recorded(t, "openai/chat/chat-streaming-detailed-usage.bodies/00.response.sse"))
	want := string(withUsage[len(withUsage)-2].Data)
	want = strings.Replace(want, `"chatcmpl-C4Hq5a6K3RaPMymUv70btQNYv6SvY"`, `"chatcmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp"`, 1)
	want = strings.Replace(want, `"created":1755137921`, `"created":1755137933`, 1)
	if got := string(s.chunks[len(s.chunks)-1].raw); got != want {
		t.Errorf("usage chunk %s\nwant %s", got, want)
	}
}

// chatStream derives from a completion the stream OpenAI sends for it: a
// recorded OpenAI stream, accumulated into its completion, comes back
// chunk for chunk but for the "obfuscation" padding and where the text is
// cut into pieces (tool call arguments are cut where OpenAI cuts them).
func TestChatStreamIsShapedLikeOpenAIs(t *testing.T) {
	for _, tt := range []struct {
		file       string
		samePieces bool
	}{
		{"openai/chat/test_run_stream_sync_streams_real_model.bodies/00.response.sse", true}, // a tool call
		{"openai/chat/test_run_stream_sync_streams_real_model.bodies/01.response.sse", false},
		{"openai/chat/chat-streaming.bodies/00.response.sse", false},
		{"openai/chat/chat-streaming-detailed-usage.bodies/00.response.sse", true},
	} {
		t.Run(tt.file, func(t *testing.T) {
			var dec sse.Decoder
			var want []map[string]any
			for _, ev := range dec.Feed(recorded(t, tt.file)) {
				if string(ev.Data) != "[DONE]" {
					var c map[string]any
					if err := json.Unmarshal(ev.Data, &c); err != nil {
						t.Fatal(err)
					}
					want = append(want, c)
				}
			}
			completion, includeUsage := accumulate(want)
			b, err := json.Marshal(completion)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := chatStream(recording{status: 200, contentType: "application/json", body: b}, includeUsage)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasSuffix(rec.body, []byte("\n\ndata: [DONE]\n\n")) || rec.contentType != "text/event-stream; charset=utf-8" {
				t.Errorf("stream %s (%s): want it ended by data: [DONE]", rec.body, rec.contentType)
			}
			dec = sse.Decoder{}
			var got []map[string]any
			for _, ev := range dec.Feed(rec.body) {
				if string(ev.Data) != "[DONE]" {
					var c map[string]any
					if err := json.Unmarshal(ev.Data, &c); err != nil {
						t.Fatalf("event %s: %v", ev.Data, err)
					}
					got = append(got, c)
				}
			}
			if !tt.samePieces {
				want, got = joinPieces(want), joinPieces(got)
			}
			if diff := cmp.Diff(withoutObfuscation(want), got); diff != "" {
				t.Errorf("derived stream (-recorded +derived):\n%s", diff)
			}
		})
	}
}

// accumulate reads a recorded stream of one choice into the completion it
// streamed, as a client accumulates it, keeping the members OpenAI sent.
func accumulate(chunks []map[string]any) (completion map[string]any, includeUsage bool) {
	completion = map[string]any{"object": "chat.completion"}
	for _, k := range []string{"id", "created", "model", "service_tier", "system_fingerprint"} {
		if v, ok := chunks[0][k]; ok {
			completion[k] = v
		}
	}
	choice := map[string]any{"index": 0.0}
	message := map[string]any{}
	var text *string
	var calls []map[string]any
	for _, c := range chunks {
		if u, ok := c["usage"]; ok {
			includeUsage = true
			if u != nil {
				completion["usage"] = u
			}
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			if _, ok := ch["logprobs"]; ok {
				choice["logprobs"] = nil
			}
			if fr := ch["finish_reason"]; fr != nil {
				choice["finish_reason"] = fr
			}
			delta := ch["delta"].(map[string]any)
			for k, v := range delta {
				switch k {
				case "role":
					message["role"] = v
				case "refusal":
					message["refusal"] = v
				case "content":
					if s, ok := v.(string); ok {
						joined := s
						if text != nil {
							joined = *text + s
						}
						text = &joined
					} else if text == nil {
						message["content"] = nil
					}
				case "tool_calls":
					for _, tc := range v.([]any) {
						tc := tc.(map[string]any)
						f := tc["function"].(map[string]any)
						if i := int(tc["index"].(float64)); i == len(calls) {
							calls = append(calls, map[string]any{"id": tc["id"], "type": tc["type"],
								"function": map[string]any{"name": f["name"], "arguments": f["arguments"]}})
						} else {
							cf := calls[i]["function"].(map[string]any)
							cf["arguments"] = cf["arguments"].(string) + f["arguments"].(string)
						}
					}
				}
			}
		}
	}
	if text != nil {
		message["content"] = *text
	}
	if calls != nil {
		message["tool_calls"] = calls
	}
	choice["message"] = message
	completion["choices"] = []any{choice}
	return completion, includeUsage
}

// joinPieces joins the text pieces of consecutive chunks that carry only
// a piece of the same text.
func joinPieces(chunks []map[string]any) []map[string]any {
	var out []map[string]any
	prev := ""
	for _, c := range chunks {
		key, piece := "", ""
		if choices, _ := c["choices"].([]any); len(choices) == 1 {
			if delta, _ := choices[0].(map[string]any)["delta"].(map[string]any); len(delta) == 1 {
				for k, v := range delta {
					if s, ok := v.(string); ok {
						key, piece = k, s
					}
				}
			}
		}
		if key != "" && key == prev {
			delta := out[len(out)-1]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
			delta[key] = delta[key].(string) + piece
			continue
		}
		prev = key
		out = append(out, c)
	}
	return out
}

func withoutObfuscation(chunks []map[string]any) []map[string]any {
	for _, c := range chunks {
		delete(c, "obfuscation")
	}
	return chunks
}

func FuzzTokens(f *testing.F) {
	for _, s := range []string{"", " ", `{"country":"UK"}`, "Hi there! How can I help?\n\n", "you’d like 3.14 ümlaut  ", "{ \"city\": \"Paris\" }"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pieces := tokens(s)
		if strings.Join(pieces, "") != s {
			t.Fatalf("tokens(%q) = %q, which do not join to it", s, pieces)
		}
		for _, p := range pieces {
			if p == "" {
				t.Fatalf("tokens(%q) = %q has an empty piece", s, pieces)
			}
		}
	})
}
