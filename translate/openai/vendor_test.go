package openai

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

// A service_tier OpenAI's schema does not know (Groq answers "on_demand")
// goes, in JSON and in stream chunks; OpenAI's own stay. (Groq's answer
// as its API reference shows it; no recording has the member.)
func TestForeignServiceTier(t *testing.T) {
	chat := func(stream bool) translate.Translator {
		body := `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}]}`
		}
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		c := NewCompatibleChat(CompatibleProviders()["groq"])(translate.Target{Model: "llama-3.3-70b-versatile"}, req)
		c.RequestBody() //nolint:errcheck // a valid request
		if stream {
			c.ResponseHeaders(200, "text/event-stream")
		} else {
			c.ResponseHeaders(200, "application/json")
		}
		return c
	}
	for tier, kept := range map[string]bool{"on_demand": false, "default": true} {
		out, err := chat(false).ResponseBody([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"llama-3.3-70b-versatile",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4},"system_fingerprint":"fp_1","x_groq":{"id":"req_1"},"service_tier":"`+tier+`"}`), true)
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", out)
		if strings.Contains(string(out), `"service_tier"`) != kept {
			t.Errorf("%s: %s", tier, out)
		}
		out, err = chat(true).ResponseBody([]byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"`+tier+`",`+
			`"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}`+"\n\n"), false)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := strings.CutPrefix(strings.TrimSpace(string(out)), "data: ")
		spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(data))
		if strings.Contains(data, `"service_tier"`) != kept {
			t.Errorf("%s chunk: %s", tier, out)
		}
	}
}

// magistralAnswer is a Mistral thinking answer as Mistral's reasoning
// documentation shows it: the message content as typed parts, the
// thinking first.
const magistralAnswer = `{"id":"cmpl-1","object":"chat.completion","model":"magistral-medium-latest","created":1,"choices":[{"index":0,"message":{"role":"assistant","tool_calls":null,` +
	`"content":[{"type":"thinking","thinking":[{"type":"text","text":"2 and 2 make 4."}]},{"type":"text","text":"The answer is 4."}]},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`

// A Mistral thinking answer in JSON, like its streams, has its text as the
// content and its thinking as reasoning_content: never the parts array the
// schema forbids, never the thinking in the content.
func TestMistralThinkingAnswer(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"2+2?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCompatibleChat(CompatibleProviders()["mistral"])(translate.Target{Model: "magistral-medium-latest"}, req)
	c.RequestBody() //nolint:errcheck // a valid request
	c.ResponseHeaders(200, "application/json")
	out, err := c.ResponseBody([]byte(magistralAnswer), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	if !strings.Contains(string(out), `"content":"The answer is 4.","reasoning_content":"2 and 2 make 4."`) {
		t.Errorf("answer %s", out)
	}
}

// Finish reasons of the family that OpenAI's schema does not have become
// the nearest it has, in JSON and in chunks.
func TestForeignFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{"model_length": "length", "insufficient_system_resource": "length", "error": "stop", "abort": "stop", "tool_calls": "tool_calls", "content_filter": "content_filter"} {
		req, _ := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`))
		c := NewCompatibleChat(CompatibleProviders()["mistral"])(translate.Target{Model: "m"}, req)
		c.RequestBody() //nolint:errcheck // a valid request
		c.ResponseHeaders(200, "application/json")
		out, err := c.ResponseBody([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"`+reason+`","message":{"role":"assistant","content":"Hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`), true)
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "CreateChatCompletionResponse", out)
		if !strings.Contains(string(out), `"finish_reason":"`+want+`"`) {
			t.Errorf("%s: %s, want %s", reason, out, want)
		}

		sreq, _ := api.ParseChatRequest([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
		s := NewCompatibleChat(CompatibleProviders()["mistral"])(translate.Target{Model: "m"}, sreq)
		s.RequestBody() //nolint:errcheck // a valid request
		s.ResponseHeaders(200, "text/event-stream")
		out, _ = s.ResponseBody([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"`+reason+`"}]}`+"\n\n"), false)
		data, _ := strings.CutPrefix(strings.TrimSpace(string(out)), "data: ")
		spec.ValidateT(t, "CreateChatCompletionStreamResponse", []byte(data))
		if !strings.Contains(data, `"finish_reason":"`+want+`"`) {
			t.Errorf("%s chunk: %s", reason, out)
		}
	}
}
