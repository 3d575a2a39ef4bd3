package cohere

import "testing"

// Stream events in Cohere's v2 shapes: text with escapes, and the start
// and the argument pieces of a tool call.
var benchEvents = []struct{ name, event string }{
	{"content-escapes", "event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\"\\n\\n* **Toronto** \\u2014 \\\"cloudy\\\" <today>\"}}}}\n\n"},
	{"tool-call-start", "event: tool-call-start\ndata: {\"type\":\"tool-call-start\",\"index\":0,\"delta\":{\"message\":{\"tool_calls\":{\"id\":\"get_weather_nsz5zm3w56q3\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}}}}\n\n"},
	{"tool-call-delta", "event: tool-call-delta\ndata: {\"type\":\"tool-call-delta\",\"index\":0,\"delta\":{\"message\":{\"tool_calls\":{\"function\":{\"arguments\":\"{\\n    \\\"\"}}}}}\n\n"},
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
