package openai

import (
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Chunks as servers send them: OpenAI's (recorded) and vLLM's shape, whose
// "logprobs": null and "finish_reason": null need no repair.
var benchChunks = []struct{ name, chunk string }{
	{"openai-recorded", `data: {"id":"chatcmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp","object":"chat.completion.chunk","created":1755137933,"model":"gpt-5-nano-2025-08-07","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],"usage":null,"obfuscation":"LcdzdJdMMgDHt6"}` + "\n\n"},
	{"vllm-style", `data: {"id":"chatcmpl-4f0c9b2e8d7a4c1b9e6f3a2d5c8b7e1f","object":"chat.completion.chunk","created":1755137933,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null,"stop_reason":null}]}` + "\n\n"},
}

func benchmarkStreamChunk(b *testing.B, q Quirks) {
	req, err := api.ParseChatRequest([]byte(streamReq + `}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range benchChunks {
		b.Run(bc.name, func(b *testing.B) {
			tr := NewCompatibleChat(q)(translate.Target{Model: "m"}, req)
			tr.ResponseHeaders(200, "text/event-stream")
			chunk := []byte(bc.chunk)
			b.ReportAllocs()
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				if out, err := tr.ResponseBody(chunk, false); err != nil || len(out) == 0 {
					b.Fatalf("out %q, err %v", out, err)
				}
			}
		})
	}
}

// One chunk through plain OpenAI's translator.
func BenchmarkStreamChunkOpenAI(b *testing.B) { benchmarkStreamChunk(b, Quirks{}) }

// The same chunk through a compatible server's (vLLM's quirks).
func BenchmarkStreamChunkCompatible(b *testing.B) {
	benchmarkStreamChunk(b, CompatibleProviders()["vllm"])
}
