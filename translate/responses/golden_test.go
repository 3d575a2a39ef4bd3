package responses

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest"
)

// The golden cases replay recorded provider traffic (under
// testdata/fixtures, provenance in testdata/fixtures/MANIFEST.md); each case folder under
// testdata holds the client's Responses request (request.json, written to
// match the recorded request), the upstream request (upstream.json) and
// what the client gets (client.json or client.sse). translatetest
// validates every body against the schema Response (ErrorResponse for
// errors) and every event against ResponseStreamEvent; observe adds what
// is particular to Responses.
const (
	recorded          = "../../testdata/fixtures/"
	recordedResponses = recorded + "openai/responses/"
	jsonType          = "application/json"
	sseType           = "text/event-stream; charset=utf-8"
)

// goldenID and goldenCreated name every golden response.
const (
	goldenID      = "resp_golden"
	goldenCreated = 1700000000
)

type chatFactory func(translate.Target, *api.ChatRequest) translate.Translator

// passthroughCases relay recorded OpenAI Responses traffic. The recordings
// span API versions: the older ones lack sequence_number, logprobs and
// the function name on function_call_arguments.done, all of them send
// "user": null.
func passthroughCases(cut string) []translatetest.Case {
	return []translatetest.Case{
		{Name: "passthrough-text", Recording: recordedResponses + "test_openai_responses_model_simple_response.bodies/00.response.json", ContentType: jsonType},
		{Name: "passthrough-tool-call", Recording: recordedResponses + "test_openai_responses_model_simple_response_with_tool_call.bodies/00.response.json", ContentType: jsonType},
		{Name: "passthrough-tool-result", Recording: recordedResponses + "test_openai_responses_model_simple_response_with_tool_call.bodies/01.response.json", ContentType: jsonType},
		{Name: "passthrough-stream-logprobs", Recording: recordedResponses + "test_openai_instructions_with_responses_logprobs_streaming.bodies/00.response.sse", ContentType: sseType},
		{Name: "passthrough-stream-tools", Recording: recordedResponses + "test_openai_responses_stream.bodies/00.response.sse", ContentType: sseType},
		{Name: "passthrough-stream-tool-result", Recording: recordedResponses + "test_openai_responses_stream.bodies/01.response.sse", ContentType: sseType},
		{Name: "passthrough-stream-reasoning", Recording: recordedResponses + "test_openai_responses_streaming_usage.bodies/00.response.sse", ContentType: sseType},
		// The recorded request has temperature -1, which the gateway
		// refuses itself: the recording is not played.
		{Name: "passthrough-invalid-request", Recording: recorded + "openai/errors/test_openai_responses_model_http_error.bodies/00.response.json", Status: 400, ContentType: jsonType},
		// OpenAI's answer to that request, played for one the gateway
		// passes (the request without temperature), stands for any error
		// OpenAI answers a stream request with.
		{Name: "passthrough-error", Recording: recorded + "openai/errors/test_openai_responses_model_http_error.bodies/00.response.json", Status: 400, ContentType: jsonType},
		// The stream of passthrough-stream-tool-result, cut off before
		// response.output_text.done: the client gets an error event.
		{Name: "passthrough-stream-cut", Recording: cut, ContentType: sseType},
		// No web search is recorded: written by hand (provider.json) in
		// the shape OpenAI's web search guide documents, web_search_call
		// items of each action before the cited message; the searches
		// (not the page opened or searched within) are the usage's.
		{Name: "passthrough-web-search", Recording: "testdata/passthrough-web-search/provider.json", ContentType: jsonType},
	}
}

// bridgeGroup is the golden cases of one provider's chat translator.
type bridgeGroup struct {
	provider string
	chat     chatFactory
	cases    []translatetest.Case
}

// bridgeGoldens run recorded chat traffic through a provider's chat
// translator and the bridge.
func bridgeGoldens(cut string) []bridgeGroup {
	return []bridgeGroup{
		{"anthropic", anthropic.NewChat, []translatetest.Case{
			{Name: "anthropic-text", Recording: recorded + "anthropic/test_anthropic_model_instructions.bodies/00.response.json", ContentType: jsonType},
			{Name: "anthropic-tools", Recording: recorded + "anthropic/test_multiple_parallel_tool_calls.bodies/00.response.json", ContentType: jsonType},
			{Name: "anthropic-thinking-stream", Recording: recorded + "anthropic/test_anthropic_model_thinking_part_stream.bodies/00.response.sse", ContentType: sseType},
			// The stream of anthropic-thinking-stream, cut off before
			// its message_delta: the chat translator's error event
			// becomes the Responses error event.
			{Name: "anthropic-stream-cut", Recording: cut, ContentType: sseType},
			// Anthropic refuses effort xhigh for the model; the gateway
			// knows no thinking budget for it and refuses it first.
			{Name: "anthropic-effort-xhigh", Recording: recorded + "anthropic/test_anthropic_explicit_effort_xhigh_unsupported_model_errors.bodies/00.response.json", Status: 400, ContentType: jsonType},
		}},
		{"gemini", gemini.NewChat, []translatetest.Case{
			{Name: "gemini-text", Recording: recorded + "gemini/test_google_model.bodies/00.response.json", ContentType: "application/json; charset=UTF-8"},
			{Name: "gemini-tool-stream", Recording: recorded + "gemini/test_google_model_iter_stream.bodies/00.response.sse", ContentType: "text/event-stream"},
		}},
		{"bedrock", bedrock.NewChat, []translatetest.Case{
			{Name: "bedrock-text", Recording: recorded + "bedrock/test_bedrock_model.bodies/00.response.json", ContentType: jsonType},
			{Name: "bedrock-tool-stream", Recording: recorded + "bedrock/test_bedrock_model_iter_stream.bodies/00.response.eventstream.bin", ContentType: "application/vnd.amazon.eventstream"},
			{Name: "bedrock-stream-error", Recording: recorded + "bedrock/test_bedrock_streaming_error.bodies/00.response.json", Status: 400, ContentType: jsonType},
		}},
		{"cohere", cohere.NewChat, []translatetest.Case{
			{Name: "cohere-text", Recording: recorded + "cohere/test_request_simple_success_with_vcr.bodies/00.response.json", ContentType: jsonType},
		}},
		{"openai", openai.NewChat, []translatetest.Case{
			{Name: "openai-tools", Recording: recorded + "openai/chat/chat-tools.bodies/00.response.json", ContentType: jsonType},
			{Name: "openai-reasoning", Recording: recorded + "openai/chat/chat-reasoning.bodies/00.response.json", ContentType: jsonType},
			{Name: "openai-stream", Recording: recorded + "openai/chat/chat-streaming.bodies/00.response.sse", ContentType: sseType},
			{Name: "openai-stream-tool-calls", Recording: recorded + "openai/chat/test_run_stream_sync_streams_real_model.bodies/00.response.sse", ContentType: sseType},
			{Name: "openai-stream-incomplete", Recording: recorded + "openai/chat/chat-streaming-detailed-usage.bodies/00.response.sse", ContentType: sseType},
			{Name: "openai-unknown-model", Recording: recorded + "openai/errors/chat-unknown-model.bodies/00.response.json", Status: 404, ContentType: "application/json; charset=utf-8"},
			// No refusal is recorded: these answers are written by hand
			// (provider.json, provider.sse in the case folders) in the
			// shape OpenAI documents for one, message.refusal and
			// choices[].delta.refusal pieces ending with stop.
			{Name: "openai-refusal", Recording: "testdata/openai-refusal/provider.json", ContentType: jsonType},
			{Name: "openai-refusal-stream", Recording: "testdata/openai-refusal-stream/provider.sse", ContentType: sseType},
		}},
	}
}

func TestPassthroughGoldens(t *testing.T) {
	cut := cutRecording(t, recordedResponses+"test_openai_responses_stream.bodies/01.response.sse", "event: response.output_text.done")
	translatetest.RunGoldens(t, "testdata", translatetest.Responses, passthroughCases(cut), func(t testing.TB, request []byte) translate.Translator {
		r, err := ParseRequest(request)
		if err != nil {
			return rejected{err}
		}
		p := NewPassthrough(translate.Target{Provider: "openai", Model: r.Model, APIKey: "sk-provider"}, r, nil, goldenID)
		return observe(t, p, r, p.Conversation)
	})
}

func TestBridgeGoldens(t *testing.T) {
	cut := cutRecording(t, recorded+"anthropic/test_anthropic_model_thinking_part_stream.bodies/00.response.sse", "event: message_delta")
	for _, g := range bridgeGoldens(cut) {
		translatetest.RunGoldens(t, "testdata", translatetest.Responses, g.cases, func(t testing.TB, request []byte) translate.Translator {
			r, err := ParseRequest(request)
			if err != nil {
				return rejected{err}
			}
			chatReq, err := ToChat(r, nil)
			if err != nil {
				return rejected{err}
			}
			// The recordings were made with the client's model as the
			// upstream one.
			chat := g.chat(translate.Target{Provider: g.provider, Model: r.Model, APIKey: "sk-provider"}, chatReq)
			tr := NewTranslator(chat, r, nil, goldenID, goldenCreated)
			return observe(t, tr, r, tr.Conversation)
		})
	}
}

// cutRecording writes the recording at path up to the first occurrence of
// at to a temporary file and returns its path.
func cutRecording(t *testing.T, path, at string) string {
	t.Helper()
	b := translatetest.ReadFile(t, path)
	i := strings.Index(string(b), at)
	if i < 0 {
		t.Fatalf("%s has no %q", path, at)
	}
	out := filepath.Join(t.TempDir(), "cut"+filepath.Ext(path))
	if err := os.WriteFile(out, b[:i], 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// rejected is a request the gateway refuses before any translator is
// built: RunGoldens renders the client error as the upstream request.
type rejected struct{ err error }

func (rejected) Output() *translate.Output { return &translate.Output{} }

func (r rejected) RequestBody() (translate.Upstream, error) { return translate.Upstream{}, r.err }
func (r rejected) ResponseHeaders(int, string) translate.Head {
	panic("a refused request has no response")
}
func (r rejected) ResponseBody([]byte, bool) ([]byte, error) {
	panic("a refused request has no response")
}
func (r rejected) Usage() translate.Usage { return translate.Usage{} }

// observed records what a Responses translator gave the client, to check
// at the end of the case what RunGoldens does not know of Responses.
type observed struct {
	translate.Translator
	req          *Request
	conversation func() []json.RawMessage
	head         translate.Head
	out          []byte
}

// observe wraps tr and checks, once the case is over, that a stream's
// events are named by their type and numbered from 0, that a completed
// response is stored as the conversation (input and output) and that
// its usage is the translator's, and that nothing is stored otherwise.
func observe(t testing.TB, tr translate.Translator, r *Request, conversation func() []json.RawMessage) translate.Translator {
	o := &observed{Translator: tr, req: r, conversation: conversation}
	t.Cleanup(func() {
		if o.head.Status != 0 {
			o.check(t)
		}
	})
	return o
}

func (o *observed) ResponseHeaders(status int, contentType string) translate.Head {
	o.head = o.Translator.ResponseHeaders(status, contentType)
	return o.head
}

func (o *observed) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := o.Translator.ResponseBody(chunk, endOfStream)
	o.out = append(o.out, out...)
	return out, err
}

func (o *observed) check(t testing.TB) {
	t.Helper()
	final := o.out // the Response the client got, if it completed
	switch {
	case o.head.Stream:
		checkEvents(t, o.out)
		final = nil
		var dec sse.Decoder
		if events := dec.Feed(o.out); len(events) > 0 {
			last := events[len(events)-1]
			var ev struct{ Response json.RawMessage }
			if (last.Type == "response.completed" || last.Type == "response.incomplete") && json.Unmarshal(last.Data, &ev) == nil {
				final = ev.Response
			}
		}
	case o.head.Status/100 != 2:
		final = nil
	}
	conv := o.conversation()
	if final == nil {
		if conv != nil {
			t.Errorf("a response that did not complete stored the conversation %s", conv)
		}
		return
	}
	var resp struct {
		Output []json.RawMessage `json:"output"`
		Usage  struct {
			InputTokens        int64 `json:"input_tokens"`
			OutputTokens       int64 `json:"output_tokens"`
			TotalTokens        int64 `json:"total_tokens"`
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(final, &resp); err != nil {
		t.Fatalf("the final Response does not decode: %v", err)
	}
	input, err := o.req.Items()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(decodeAll(t, append(input, resp.Output...)), decodeAll(t, conv)); diff != "" {
		t.Errorf("the stored conversation is not the input and the output (-want +got):\n%s", diff)
	}
	u := resp.Usage
	want := translate.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.InputTokensDetails.CachedTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	for _, it := range resp.Output { // the searches OpenAI bills
		var call struct {
			Type   string
			Action struct{ Type string }
		}
		if json.Unmarshal(it, &call) == nil && call.Type == "web_search_call" && call.Action.Type == "search" {
			want.WebSearchRequests++
		}
	}
	if got := o.Usage(); got != want {
		t.Errorf("Usage() = %+v, the client's Response says %+v", got, want)
	}
}

func decodeAll(t testing.TB, items []json.RawMessage) []any {
	t.Helper()
	out := []any{}
	for _, it := range items {
		var v any
		if err := json.Unmarshal(it, &v); err != nil {
			t.Fatalf("item %s: %v", it, err)
		}
		out = append(out, v)
	}
	return out
}
