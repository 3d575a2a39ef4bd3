package gemini

import "testing"

// Stream events as Gemini sends them: every one carries usageMetadata,
// modelVersion and responseId; text with escapes, a thought and a tool
// call (recorded shapes).
var benchEvents = []struct{ name, event string }{
	{"text-recorded", `data: {"candidates": [{"content": {"parts": [{"text": " capital of France"}],"role": "model"}}],"usageMetadata": {"promptTokenCount": 15,"totalTokenCount": 15,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 15}]},"modelVersion": "gemini-2.0-flash-exp","responseId": "w1peaMz6INOvnvgPgYfPiQY"}` + "\r\n\r\n"},
	{"text-escapes", `data: {"candidates": [{"content": {"parts": [{"text": "\n\n* **Paris** \u2014 the \"City of Light\" <capital>\n"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 13,"candidatesTokenCount": 8,"totalTokenCount": 21,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 13}]},"modelVersion": "gemini-2.5-flash","responseId": "w1peaMz6INOvnvgPgYfPiQY"}` + "\r\n\r\n"},
	{"thought", `data: {"candidates": [{"content": {"parts": [{"text": "**Identifying the capital**\n\nThe user wants the capital of France.","thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 13,"totalTokenCount": 62,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 13}],"thoughtsTokenCount": 49},"modelVersion": "gemini-2.5-flash","responseId": "w1peaMz6INOvnvgPgYfPiQY"}` + "\r\n\r\n"},
	{"tool-call", `data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_capital","args": {"country": "France"}}}],"role": "model"},"finishReason": "STOP"}],"usageMetadata": {"promptTokenCount": 52,"candidatesTokenCount": 5,"totalTokenCount": 57,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 52}],"candidatesTokensDetails": [{"modality": "TEXT","tokenCount": 5}]},"modelVersion": "gemini-2.0-flash","responseId": "1lpeaMTxIpW1nvgP-O3vwQY"}` + "\r\n\r\n"},
}

func BenchmarkStreamChunkShapes(b *testing.B) {
	for _, bc := range benchEvents {
		b.Run(bc.name, func(b *testing.B) {
			c := newChat(b, streamReq)
			c.ResponseHeaders(200, "text/event-stream")
			ev := []byte(bc.event)
			b.ReportAllocs()
			for b.Loop() {
				if out, _ := c.ResponseBody(ev, false); len(out) == 0 {
					b.Fatal("no output")
				}
			}
		})
	}
}
