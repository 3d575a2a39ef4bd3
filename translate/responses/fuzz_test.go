package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"modelgate/translate"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

// Any request body is a Request or a 400, and any accepted request becomes
// a chat request or a 400: never a panic.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call_output","call_id":"c","output":"o"}],"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}}`))
	f.Add([]byte(`{"model":"m","previous_response_id":"resp_1","truncation":"auto","max_output_tokens":16}`))
	f.Add([]byte(`{"model":"m","input":[null,1,"x",{}],"text":{"format":{"type":"json_schema","schema":{}}},"reasoning":{"effort":"high"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body)
		var re *openai.RequestError
		if err != nil {
			if !errors.As(err, &re) {
				t.Fatalf("ParseRequest error %v is not a client error", err)
			}
			return
		}
		if _, err := ToChat(r, nil); err != nil && !errors.As(err, &re) {
			t.Fatalf("ToChat error %v is not a client error", err)
		}
		if r.PreviousResponseID != "" {
			p := NewPassthrough(translate.Target{Model: "m"}, r, []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"x"}`)}, "resp_f")
			if _, err := p.RequestBody(); err != nil && !errors.As(err, &re) && r.Members["input"] == nil {
				t.Fatalf("RequestBody: %v", err)
			}
		}
	})
}

// Whatever the provider streams, split anywhere, the client gets events
// whose event line names their type, numbered from 0 without gaps, and
// nothing after the terminal event.
func FuzzPassthroughStream(f *testing.F) {
	f.Add([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"user\":null,\"usage\":null}}\n\n"+
		"data: {\"type\":\"response.output_text.delta\",\"delta\":\"x\",\"sequence_number\":1}\n\n"+
		"data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\"}]}],\"usage\":{\"input_tokens\":1}}}\n\n"), uint8(7))
	f.Add([]byte("data: {\"type\":\"error\"}\n\ndata: {\"type\":\"response.completed\"}\n\n"), uint8(1))
	f.Add([]byte("data: [DONE]\n\n"), uint8(3))
	f.Add([]byte("data: {\"type\":\"x.delta\\n\\ndata: forged\",\"sequence_number\":0}\n\n"), uint8(5))
	f.Fuzz(func(t *testing.T, upstream []byte, split uint8) {
		r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
		p := NewPassthrough(translate.Target{Model: "m"}, r, nil, "resp_f")
		p.ResponseHeaders(200, "text/event-stream")
		var out []byte
		n := int(split%32) + 1
		for len(upstream) > 0 {
			c := upstream[:min(n, len(upstream))]
			upstream = upstream[len(c):]
			b, err := p.ResponseBody(c, false)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		b, err := p.ResponseBody(nil, true)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		var dec sse.Decoder
		events := dec.Feed(out)
		if dec.Pending() || len(events) == 0 {
			t.Fatalf("partial or empty output %q", out)
		}
		for i, ev := range events {
			var m struct {
				Type string `json:"type"`
				Seq  *int   `json:"sequence_number"`
			}
			if err := json.Unmarshal(ev.Data, &m); err != nil || m.Type != ev.Type || m.Seq == nil || *m.Seq != i {
				t.Fatalf("event %d: %q %s", i, ev.Type, ev.Data)
			}
			terminal := m.Type == "error" || m.Type == "response.completed" || m.Type == "response.incomplete" || m.Type == "response.failed"
			if terminal != (i == len(events)-1) {
				t.Fatalf("event %d of %d is %s", i, len(events), m.Type)
			}
		}
		if bytes.Contains(out, []byte("[DONE]")) {
			t.Fatal("[DONE] reached the client")
		}
	})
}
