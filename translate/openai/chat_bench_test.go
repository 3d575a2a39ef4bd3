package openai

import (
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

// The exchange the gateway's CPU profile is taken on: a chat request of
// about 620 bytes and OpenAI's compact answer of about 730.
const (
	benchRequest = `{"model":"gpt-4o","messages":[` +
		`{"role":"system","content":"You are the support assistant of an online bookshop. Answer briefly and politely; when you do not know something, say so and offer to open a ticket."},` +
		`{"role":"user","content":"Hello! I ordered \"The Left Hand of Darkness\" last week and the tracking page still says it has not shipped. My order number is 118-4432-0097. Can you tell me what is going on and when it will arrive? I need it for a reading group on Thursday."}],` +
		`"temperature":0.7,"top_p":1,"max_completion_tokens":256,"user":"customer-4432"}`
	benchAnswer = `{"id":"chatcmpl-CAbR7w3k4ZJ8pQ2vX1sLm9TnY0uHq","object":"chat.completion","created":1764296393,"model":"gpt-4o-2024-08-06",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"I'm sorry for the wait! Order 118-4432-0097 is packed and waiting for the carrier; ` +
		`it should ship tomorrow morning and arrive within two working days, so before Thursday. I'll send you the tracking link as soon as it moves.",` +
		`"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":98,"completion_tokens":54,"total_tokens":152,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},` +
		`"service_tier":"default","system_fingerprint":"fp_a1b2c3d4e5"}`
)

// The upstream body of a parsed request, buffered and streamed, to a
// deployment whose model is the client's or another.
func BenchmarkChatRequestBody(b *testing.B) {
	stream := benchRequest[:len(benchRequest)-1] + `,"stream":true,"stream_options":{"include_usage":true}}`
	for _, bc := range []struct{ name, body, model string }{
		{"buffered", benchRequest, "gpt-4o-2024-08-06"},
		{"buffered-same-model", benchRequest, "gpt-4o"},
		{"stream", stream, "gpt-4o-2024-08-06"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, err := api.ParseChatRequest([]byte(bc.body))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewChat(translate.Target{Model: bc.model}, req).RequestBody(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The compact answer of the same exchange through the translator.
func BenchmarkChatCompletion(b *testing.B) {
	req, err := api.ParseChatRequest([]byte(benchRequest))
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(benchAnswer)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		tr := NewChat(translate.Target{Model: "gpt-4o-2024-08-06"}, req)
		tr.ResponseHeaders(200, "application/json")
		if _, err := tr.ResponseBody(body, true); err != nil {
			b.Fatal(err)
		}
	}
}
