package responses

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/openai"
)

// The refusal answers are written by hand in the shape OpenAI's chat
// completions API documents for a refusal (message.refusal, and
// choices[].delta.refusal pieces in a stream, finish_reason stop): no
// recording of one is kept.
const (
	refusalText = "I'm sorry, I cannot assist with that request."
	refusalJSON = `{"id":"chatcmpl-r","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":null,"refusal":"` + refusalText + `","annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22}}`
	refusalSSE = `data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"refusal":"I cannot assist with that request."},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":10,"total_tokens":22}}` + "\n\n" +
		"data: [DONE]\n\n"
)

// wantRefusal is the Responses API's refusal content part.
func wantRefusal(text string) map[string]any {
	return map[string]any{"type": "refusal", "refusal": text}
}

// openAIChat builds OpenAI's chat translator of a Responses request.
func openAIChat(t *testing.T) func(translate.Target, *Request) translate.Translator {
	return func(tg translate.Target, r *Request) translate.Translator {
		req, err := ToChat(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		return openai.NewChat(tg, req)
	}
}

// A chat answer's refusal is the message's refusal content part, in a
// Response as in OpenAI's.
func TestRefusalJSON(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"m","input":"Help me with something bad."}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := FromChat(r, []byte(refusalJSON), "resp_1", 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "Response", out)
	var resp struct {
		Status string
		Output []map[string]any
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
		"content": []any{wantRefusal(refusalText)}}}
	if diff := cmp.Diff(want, resp.Output); diff != "" || resp.Status != "completed" {
		t.Errorf("status %s, output (-want +got):\n%s", resp.Status, diff)
	}
}

// A streamed refusal reaches a Responses client as OpenAI's Responses API
// streams one: a refusal content part added to the message, its
// response.refusal.delta events, response.refusal.done and the part done,
// every event valid.
func TestRefusalStream(t *testing.T) {
	events := checkEvents(t, bridgeStream(t, `{"model":"m","input":"Help me with something bad.","stream":true}`, openAIChat(t), "text/event-stream", []byte(refusalSSE)))
	var got []map[string]any
	for _, e := range events {
		if typ := e["type"].(string); strings.HasPrefix(typ, "response.refusal.") || strings.HasPrefix(typ, "response.content_part.") ||
			strings.HasPrefix(typ, "response.output_item.") {
			delete(e, "sequence_number")
			got = append(got, e)
		}
	}
	item := func(status string, parts ...any) map[string]any {
		return map[string]any{"type": "message", "id": "msg_test", "status": status, "role": "assistant", "content": append([]any{}, parts...)}
	}
	at := func(typ string, m map[string]any) map[string]any {
		m["type"], m["output_index"] = typ, 0.0
		if _, ok := m["item"]; !ok {
			m["item_id"], m["content_index"] = "msg_test", 0.0
		}
		return m
	}
	want := []map[string]any{
		at("response.output_item.added", map[string]any{"item": item("in_progress")}),
		at("response.content_part.added", map[string]any{"part": wantRefusal("")}),
		at("response.refusal.delta", map[string]any{"delta": "I'm sorry, "}),
		at("response.refusal.delta", map[string]any{"delta": "I cannot assist with that request."}),
		at("response.refusal.done", map[string]any{"refusal": refusalText}),
		at("response.content_part.done", map[string]any{"part": wantRefusal(refusalText)}),
		at("response.output_item.done", map[string]any{"item": item("completed", wantRefusal(refusalText))}),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message events (-want +got):\n%s", diff)
	}
	last := events[len(events)-1]
	output := last["response"].(map[string]any)["output"]
	if diff := cmp.Diff([]any{item("completed", wantRefusal(refusalText))}, output); diff != "" || last["type"] != "response.completed" {
		t.Errorf("%s output (-want +got):\n%s", last["type"], diff)
	}
}

// Text and then a refusal in one answer are the message's two parts, at
// content indexes 0 and 1, in the events and the stored output.
func TestStreamTextThenRefusal(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"m","input":"Hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(r, "resp_test", 1700000000)
	chunk := func(delta string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	out := s.Feed([]byte(chunk(`{"role":"assistant","content":"Sure: ","refusal":null}`)+chunk(`{"refusal":"no."}`)+chunk(`{"content":"!"}`)+"data: [DONE]\n\n"), true)
	indexes := map[string][]any{}
	for _, e := range checkEvents(t, out) {
		if ci, ok := e["content_index"]; ok {
			indexes[e["type"].(string)] = append(indexes[e["type"].(string)], ci)
		}
	}
	want := map[string][]any{"response.content_part.added": {0.0, 1.0}, "response.output_text.delta": {0.0, 0.0},
		"response.refusal.delta": {1.0}, "response.output_text.done": {0.0}, "response.refusal.done": {1.0},
		"response.content_part.done": {0.0, 1.0}}
	if diff := cmp.Diff(want, indexes); diff != "" {
		t.Errorf("content indexes (-want +got):\n%s", diff)
	}
	var stored map[string]any
	if err := json.Unmarshal(s.Output()[0], &stored); err != nil {
		t.Fatal(err)
	}
	wantContent := []any{map[string]any{"type": "output_text", "text": "Sure: !", "annotations": []any{}, "logprobs": []any{}}, wantRefusal("no.")}
	if diff := cmp.Diff(wantContent, stored["content"]); diff != "" {
		t.Errorf("stored message content (-want +got):\n%s", diff)
	}
}

// A refusal the gateway answered with comes back as the assistant turn's
// text, which every provider takes; a user has no refusal to send.
func TestRefusalInput(t *testing.T) {
	tests := []struct {
		name, input string
		want        []map[string]any // the chat messages
		param       string           // of the error, when refused
	}{
		{
			name: "assistant",
			input: `[{"role":"user","content":"Pick the lock."},` +
				`{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"` + refusalText + `"}]},` +
				`{"role":"user","content":"Then how do locks work?"}]`,
			want: []map[string]any{{"role": "user", "content": "Pick the lock."},
				{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": refusalText}}},
				{"role": "user", "content": "Then how do locks work?"}},
		},
		{
			name:  "user",
			input: `[{"role":"user","content":[{"type":"refusal","refusal":"No."}]}]`,
			param: "input[0].content[0].type",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"m","input":` + tt.input + `}`))
			if err != nil {
				t.Fatal(err)
			}
			req, err := ToChat(r, nil)
			if tt.param != "" {
				var re *api.RequestError
				if !errors.As(err, &re) || re.Param != tt.param {
					t.Errorf("ToChat error %v, want one of param %s", err, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, chatMessages(t, req)); diff != "" {
				t.Errorf("chat messages (-want +got):\n%s", diff)
			}
		})
	}
}
