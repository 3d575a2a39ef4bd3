package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// The traffic both servers see: an OpenAI chat request as a client sends
// it, and OpenAI's answer as the upstream sends it, with the headers Envoy
// puts around them.

// chatRequest is a chat completion request of about 620 bytes.
const chatRequest = `{"model":"gpt-4o","messages":[` +
	`{"role":"system","content":"You are the support assistant of an online bookshop. Answer briefly and politely; when you do not know something, say so and offer to open a ticket."},` +
	`{"role":"user","content":"Hello! I ordered \"The Left Hand of Darkness\" last week and the tracking page still says it has not shipped. My order number is 118-4432-0097. Can you tell me what is going on and when it will arrive? I need it for a reading group on Thursday."}],` +
	`"temperature":0.7,"top_p":1,"max_completion_tokens":256,"user":"customer-4432"}`

// orderNumber is in chatRequest's user text, once.
const orderNumber = "118-4432-0097"

// streamRequest asks for the same answer as a stream, with usage.
var streamRequest = chatRequest[:len(chatRequest)-1] + `,"stream":true,"stream_options":{"include_usage":true}}`

// chatResponse is OpenAI's answer of about 720 bytes.
const chatResponse = `{"id":"chatcmpl-CAbR7w3k4ZJ8pQ2vX1sLm9TnY0uHq","object":"chat.completion","created":1764296393,"model":"gpt-4o-2024-08-06",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"I'm sorry for the wait! Order 118-4432-0097 is packed and waiting for the carrier; ` +
	`it should ship tomorrow morning and arrive within two working days, so before Thursday. I'll send you the tracking link as soon as it moves.",` +
	`"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":98,"completion_tokens":54,"total_tokens":152,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
	`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},` +
	`"service_tier":"default","system_fingerprint":"fp_a1b2c3d4e5"}`

// streamEvents is the number of chunks in the streamed answer (then [DONE]).
const streamEvents = 100

// streamBody is OpenAI's streamed answer: a role chunk, content chunks
// (some with multi-byte UTF-8), a finish chunk and a usage chunk, as
// OpenAI sends them to a client that asked for usage.
func streamBody() []byte {
	const head = `data: {"id":"chatcmpl-CAbR7w3k4ZJ8pQ2vX1sLm9TnY0uHq","object":"chat.completion.chunk","created":1764296393,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_a1b2c3d4e5","choices":[`
	words := strings.Fields("I'm sorry for the wait — your order is packed, “ready” and waiting for the carrier ✓ it ships tomorrow and arrives in two days, before Thursday. Bonne lecture à votre groupe ! 📚")
	var b strings.Builder
	b.WriteString(head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"mW3q"}` + "\n\n")
	for i := range streamEvents - 3 {
		text := " " + words[i%len(words)]
		fmt.Fprintf(&b, `%s{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"%s"}`+"\n\n",
			head, strconv.Quote(text), "Xy7"[:1+i%3])
	}
	b.WriteString(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"p0"}` + "\n\n")
	b.WriteString(head + `],"usage":{"prompt_tokens":98,"completion_tokens":97,"total_tokens":195,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"k"}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// firstTextMark is where streamBody's first text starts: its first
// content chunk's delta (the role chunk before it has no text).
const firstTextMark = `"delta":{"content":`

// streamPieces is how many body messages the streamed answer arrives in.
const streamPieces = 310

// cut splits body into n pieces at random boundaries, as TCP reads and
// Envoy's buffers do: inside events, inside JSON strings and inside UTF-8
// sequences. The same seed gives the same pieces.
func cut(body []byte, n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	at := map[int]bool{}
	for len(at) < n-1 {
		at[1+r.IntN(len(body)-1)] = true
	}
	pieces := make([][]byte, 0, n)
	last := 0
	for i := 1; i < len(body); i++ {
		if at[i] {
			pieces = append(pieces, body[last:i])
			last = i
		}
	}
	return append(pieces, body[last:])
}

// header is one header as Envoy sends it: lower-case name, raw value.
type header struct{ name, value string }

// requestHeaders are what Envoy forwards of an openai-python request.
func requestHeaders(key string, bodyLen int, requestID string) []header {
	return []header{
		{":authority", "llm.example.com"}, {":path", "/v1/chat/completions"}, {":method", "POST"}, {":scheme", "https"},
		{"accept", "application/json"}, {"accept-encoding", "gzip, deflate"}, {"authorization", "Bearer " + key},
		{"content-type", "application/json"}, {"content-length", strconv.Itoa(bodyLen)},
		{"user-agent", "OpenAI/Python 1.99.9"}, {"x-stainless-lang", "python"}, {"x-stainless-package-version", "1.99.9"},
		{"x-stainless-os", "Linux"}, {"x-stainless-arch", "x64"}, {"x-stainless-runtime", "CPython"},
		{"x-stainless-runtime-version", "3.12.4"}, {"x-stainless-retry-count", "0"}, {"x-stainless-read-timeout", "600"},
		{"x-forwarded-proto", "https"}, {"x-request-id", requestID},
	}
}

// responseHeaders are what OpenAI answers with, as Envoy passes them on.
func responseHeaders(contentType string, bodyLen int) []header {
	h := []header{
		{":status", "200"}, {"date", "Wed, 25 Nov 2026 10:00:00 GMT"}, {"content-type", contentType},
		{"access-control-expose-headers", "X-Request-ID"}, {"openai-organization", "user-abc123"},
		{"openai-processing-ms", "412"}, {"openai-project", "proj_abc123"}, {"openai-version", "2020-10-01"},
		{"x-envoy-upstream-service-time", "415"}, {"x-ratelimit-limit-requests", "10000"},
		{"x-ratelimit-limit-tokens", "30000000"}, {"x-ratelimit-remaining-requests", "9999"},
		{"x-ratelimit-remaining-tokens", "29999850"}, {"x-ratelimit-reset-requests", "6ms"},
		{"x-ratelimit-reset-tokens", "0s"}, {"x-request-id", "req_0f2b6e1c9d8a7b6c5d4e3f2a1b0c9d8e"},
		{"strict-transport-security", "max-age=31536000; includeSubDomains; preload"},
		{"cf-cache-status", "DYNAMIC"}, {"server", "cloudflare"}, {"cf-ray", "9a1b2c3d4e5f6a7b-FRA"}, {"alt-svc", `h3=":443"; ma=86400`},
	}
	if bodyLen >= 0 {
		h = append(h, header{"content-length", strconv.Itoa(bodyLen)})
	}
	return h
}
