package translate

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// span is a reported Text as the test reads it.
type span struct {
	Text string
	Kind TextKind
}

func spans(o *Output, out []byte) []span {
	var got []span
	for _, t := range o.Texts {
		got = append(got, span{string(out[t.Start:t.End]), t.Kind})
	}
	return got
}

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

var scanCases = []struct {
	name    string
	dialect Dialect
	stream  bool
	out     string
	texts   []span
	reasons []string
}{
	{"chat chunks", Chat, true, sse(
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"lo \"you\""},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"hmm","refusal":"no"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"index":1,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`),
		[]span{{"Hel", TextAnswer}, {`lo \"you\"`, TextAnswer}, {"hmm", TextReasoning}, {"no", TextRefusal}, {`{\"a\":1}`, TextArguments}},
		[]string{"tool_calls", "stop"}},
	{"chat chunks spaced", Chat, true, "data: {\"choices\": [{\"delta\": {\"content\" : \"x\", \"text\": \"not counted\"}, \"finish_reason\" :\n \"length\"}]}\n\ndata: [DONE]\n\n",
		[]span{{"x", TextAnswer}}, []string{"length"}},
	{"chat answer", Chat, false, `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"Hi.","reasoning_content":"think","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`,
		[]span{{"Hi.", TextAnswer}, {"think", TextReasoning}, {"{}", TextArguments}}, []string{"stop"}},
	{"responses events", Responses, true, "event: response.created\n" + sse(
		`{"type":"response.created","response":{"id":"r","status":"in_progress","incomplete_details":null,"output":[]}}`) +
		"event: response.output_text.delta\n" + sse(
		`{"type":"response.output_text.delta","item_id":"m","delta":"Hel"}`,
		`{"delta":"lo","type":"response.output_text.delta"}`,
		`{"type":"response.reasoning_summary_text.delta","delta":"why"}`,
		`{"type":"response.reasoning_text.delta","delta":"raw"}`,
		`{"type":"response.refusal.delta","delta":"no"}`,
		`{"type":"response.function_call_arguments.delta","delta":"{\"a\""}`,
		`{"type":"response.custom_tool_call_input.delta","delta":"x=1"}`,
		`{"type":"response.output_text.done","text":"Hello"}`,
		`{"type":"response.output_item.done","item":{"type":"message","status":"completed","content":[{"type":"output_text","text":"Hello"}]}}`,
		`{"type":"response.incomplete","response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","status":"incomplete"}]}}`),
		[]span{{"Hel", TextAnswer}, {"lo", TextAnswer}, {"why", TextReasoning}, {"raw", TextReasoning}, {"no", TextRefusal}, {`{\"a\"`, TextArguments}, {"x=1", TextArguments}},
		[]string{"max_output_tokens"}},
	{"responses completed", Responses, true, sse(`{"type":"response.completed","response":{"status":"completed","output":[]}}`),
		nil, []string{"completed"}},
	{"responses failed", Responses, true, sse(`{"type":"response.failed","response":{"output":[],"status":"failed","error":{"code":"server_error"}}}`),
		nil, []string{"failed"}},
	{"responses answer", Responses, false, `{"id":"r","object":"response","status":"incomplete","output":[` +
		`{"type":"reasoning","summary":[{"type":"summary_text","text":"why"}]},` +
		`{"type":"message","status":"incomplete","content":[{"type":"output_text","text":"Hi","annotations":[]},{"type":"refusal","refusal":"no"}]},` +
		`{"type":"function_call","name":"f","arguments":"{}","status":"completed"}],` +
		`"incomplete_details":{"reason":"max_output_tokens"},"text":{"format":{"type":"text"}}}`,
		[]span{{"why", TextReasoning}, {"Hi", TextAnswer}, {"no", TextRefusal}, {"{}", TextArguments}}, []string{"max_output_tokens"}},
	{"messages events", Messages, true,
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[],\"stop_reason\":null}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \\\"x\\\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null}}\n\n",
		[]span{{"hm", TextReasoning}, {`Hi \"x\"`, TextAnswer}, {`{\"a`, TextArguments}}, []string{"tool_use"}},
	{"messages answer", Messages, false, `{"type":"message","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Hi"},{"type":"tool_use","name":"f","input":{"a":"b"}}],"stop_reason":"end_turn"}`,
		[]span{{"hm", TextReasoning}, {"Hi", TextAnswer}}, []string{"end_turn"}},
	{"unknown reason", Chat, true, sse(`{"choices":[{"delta":{},"finish_reason":"eos"}]}`), nil, []string{"eos"}},
}

func TestOutputScan(t *testing.T) {
	for _, tc := range scanCases {
		t.Run(tc.name, func(t *testing.T) {
			var o Output
			o.Scan(tc.dialect, []byte(tc.out), 200, tc.stream)
			if d := cmp.Diff(tc.texts, spans(&o, []byte(tc.out))); d != "" {
				t.Errorf("texts of %s (-want +got):\n%s", tc.out, d)
			}
			if d := cmp.Diff(tc.reasons, o.FinishReasons); d != "" && len(tc.reasons)+len(o.FinishReasons) > 0 {
				t.Errorf("finish reasons (-want +got):\n%s", d)
			}
			if got, want := o.TextBytes(), generatedText([]byte(tc.out), tc.dialect, tc.stream); got != want {
				t.Errorf("TextBytes() = %d, the gateway's count %d", got, want)
			}
			if o.Scan(tc.dialect, []byte(tc.out), 500, tc.stream); len(o.Texts)+len(o.FinishReasons) > 0 {
				t.Errorf("an error answer reports %+v", o)
			}
		})
	}
}

// A stream's text is the same whatever events the output is cut into,
// as a translator returns whole events per chunk.
func TestOutputScanSplitEvents(t *testing.T) {
	for _, tc := range scanCases {
		if !tc.stream {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			var o Output
			var got []span
			var reasons []string
			for _, ev := range strings.SplitAfter(tc.out, "\n\n") {
				o.Scan(tc.dialect, []byte(ev), 200, true)
				got = append(got, spans(&o, []byte(ev))...)
				reasons = append(reasons, o.FinishReasons...)
			}
			if d := cmp.Diff(tc.texts, got); d != "" {
				t.Errorf("texts (-want +got):\n%s", d)
			}
			if len(reasons) < len(tc.reasons) {
				t.Errorf("finish reasons %v, want %v", reasons, tc.reasons)
			}
		})
	}
}

func TestOutputScanAllocs(t *testing.T) {
	out := []byte(scanCases[0].out)
	var o Output
	o.Scan(Chat, out, 200, true)
	if n := testing.AllocsPerRun(100, func() { o.Scan(Chat, out, 200, true) }); n != 0 {
		t.Errorf("%v allocations per scan", n)
	}
}

func BenchmarkOutputScanChunk(b *testing.B) {
	out := []byte(`data: {"id":"chatcmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp","object":"chat.completion.chunk","created":1755137933,"model":"gpt-5-nano-2025-08-07","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],"usage":null,"obfuscation":"LcdzdJdMMgDHt6"}` + "\n\n")
	var o Output
	b.ReportAllocs()
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		o.Scan(Chat, out, 200, true)
	}
}

// generatedText is the gateway's count of an answer's text before the
// translators reported it (extproc's estimate.go), which the reports
// keep: the string values of the members that hold text, by name.
func generatedText(out []byte, d Dialect, stream bool) int {
	n := 0
	for i := 0; i < len(out); {
		q := bytes.IndexByte(out[i:], '"')
		if q < 0 {
			break
		}
		start := i + q + 1
		end := start + stringEnd(out[start:])
		i = end + 1
		j := skipSpace(out, i)
		if j >= len(out) || out[j] != ':' {
			continue
		}
		j = skipSpace(out, j+1)
		if j >= len(out) || out[j] != '"' {
			i = j
			continue
		}
		vs := j + 1
		ve := vs + stringEnd(out[vs:])
		if textMember(string(out[start:end]), d, stream) {
			n += ve - vs
		}
		i = ve + 1
	}
	return n
}

func textMember(key string, d Dialect, stream bool) bool {
	whole := !stream
	switch key {
	case "delta":
		return stream && d == Responses
	case "content", "reasoning_content", "refusal", "arguments":
		return whole || d == Chat
	case "text", "thinking":
		return whole || d == Messages
	case "partial_json":
		return stream && d == Messages
	}
	return false
}

func TestOutputScanTranscription(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		stream    bool
		want      []span
	}{
		{"json", `{"text":"Hi there.","segments":[{"text":"Hi there."}],"usage":{"type":"duration"}}`, false, []span{{"Hi there.", TextAnswer}}},
		{"text", "Hi there.\n", false, []span{{"Hi there.\n", TextAnswer}}},
		{"stream", sse(`{"type":"transcript.text.delta","delta":"Hi"}`, `{"type":"transcript.text.done","text":"Hi"}`), true, []span{{"Hi", TextAnswer}}},
	} {
		var o Output
		o.Scan(Transcription, []byte(tc.out), 200, tc.stream)
		if d := cmp.Diff(tc.want, spans(&o, []byte(tc.out))); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}
