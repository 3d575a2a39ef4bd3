package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/openai"
	"modelgate/translate/sse"
)

// Any request body is a Request or a 400, and any accepted request becomes
// a chat request or a 400: never a panic.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call_output","call_id":"c","output":"o"}],"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}}`))
	f.Add([]byte(`{"model":"m","previous_response_id":"resp_1","truncation":"auto","max_output_tokens":16}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"custom_tool_call","call_id":"c","name":"p","input":"x","namespace":"n"},{"type":"custom_tool_call_output","call_id":"c","output":[{"type":"input_text","text":"t"}]},{"type":"web_search_call"}],"tools":[{"type":"custom","name":"p","format":{"type":"grammar","syntax":"lark","definition":"d"}},{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]},{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"required"}}`))
	f.Add([]byte(`{"model":"m","input":[null,1,"x",{}],"text":{"format":{"type":"json_schema","schema":{}}},"reasoning":{"effort":"high"}}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"item_reference","id":"rs_0a1b"},{"type":"item_reference","id":"fc_0a1b_0"},{"role":"user","content":[{"type":"input_file","file_data":"data:application/pdf;base64,JVBE","filename":"a.pdf"}]}],"tools":[{"type":"web_search","user_location":{"type":"approximate","city":"X"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body)
		var re *api.RequestError
		if err != nil {
			if !errors.As(err, &re) {
				t.Fatalf("ParseRequest error %v is not a client error", err)
			}
			return
		}
		// References resolve to stored items (here, each to a reasoning
		// item of its id) before the request is bridged.
		if err := r.Dereference(nil, func(ids []string) (map[string]json.RawMessage, error) {
			found := map[string]json.RawMessage{}
			for _, id := range ids {
				if ResponseOfItem(id) != "" {
					found[id] = mustJSON(map[string]any{"type": "reasoning", "id": id, "summary": []any{}})
				}
			}
			return found, nil
		}); err != nil {
			t.Fatalf("Dereference: %v", err)
		}
		if _, err := ToChat(r, nil, WebSearch(true)); err != nil && !errors.As(err, &re) {
			t.Fatalf("ToChat error %v is not a client error", err)
		}
		compact := func(req *api.ChatRequest) translate.Translator {
			return openai.NewChat(translate.Target{Model: "m"}, req)
		}
		if _, err := NewCompactBridge(compact, r, nil, "resp_f", 1); err != nil && !errors.As(err, &re) {
			t.Fatalf("NewCompactBridge error %v is not a client error", err)
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
		checkResponsesStream(t, append(out, b...))
	})
}

// checkResponsesStream checks a Responses event stream: whole events whose
// event line names their type, numbered from 0 without gaps, the terminal
// event last, and no [DONE].
func checkResponsesStream(t *testing.T, out []byte) {
	t.Helper()
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
		// An error event ends the stream, followed at most by the
		// response.failed that says so.
		terminal := m.Type == "response.completed" || m.Type == "response.incomplete" || m.Type == "response.failed"
		last := i == len(events)-1
		if terminal != last && !(m.Type == "error" && (last || i == len(events)-2 && events[i+1].Type == "response.failed")) {
			t.Fatalf("event %d of %d is %s", i, len(events), m.Type)
		}
	}
	if bytes.Contains(out, []byte("[DONE]")) {
		t.Fatal("[DONE] reached the client")
	}
}

// Whatever an OpenAI-compatible provider streams, split anywhere, the
// bridge (chat translator, then Stream) ends the response cleanly for
// every quirk set, never with a panic.
func FuzzBridgeStream(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\",\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n"), uint8(7))
	f.Add([]byte("data: {\"choices\":[null,{\"delta\":{\"content\":[{\"type\":\"thinking\",\"thinking\":[{\"type\":\"text\",\"text\":\"t\"}]}]}}]}\n\ndata: {\"choices\":[1]}\n\n"), uint8(3))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":99999999999999999999}]}}]}\n\n"), uint8(1))
	quirks := openai.CompatibleProviders()
	quirks["openai"] = openai.Quirks{}
	names := slices.Sorted(maps.Keys(quirks))
	f.Fuzz(func(t *testing.T, upstream []byte, split uint8) {
		for _, name := range names {
			r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
			chatReq, err := ToChat(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			tr := NewTranslator(openai.NewCompatibleChat(quirks[name])(translate.Target{Model: "m"}, chatReq), r, nil, "resp_f", 1)
			tr.ResponseHeaders(200, "text/event-stream")
			var out []byte
			n := int(split%32) + 1
			for rest := upstream; len(rest) > 0; {
				c := rest[:min(n, len(rest))]
				rest = rest[len(c):]
				b, err := tr.ResponseBody(c, false)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b...)
			}
			b, err := tr.ResponseBody(nil, true)
			if err != nil {
				t.Fatal(err)
			}
			checkResponsesStream(t, append(out, b...))
		}
	})
}

// An event over the SSE decoder's limit ends a passthrough stream, and a
// bridged one, with an error event instead of stopping silently.
func TestStreamEventTooLarge(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 1<<20)
	chunks := [][]byte{[]byte("data: {\"type\":\"response.created\",\"x\":\"")}
	for range sse.DefaultMax>>20 + 1 {
		chunks = append(chunks, big)
	}
	chunks = append(chunks, []byte("\"}\n\n"))

	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	p := NewPassthrough(translate.Target{Model: "m"}, r, nil, "resp_f")
	p.ResponseHeaders(200, "text/event-stream")
	s := NewStream(r, "resp_f", 1)
	var pass, bridged []byte
	for i, c := range chunks {
		b, _ := p.ResponseBody(c, i == len(chunks)-1)
		pass = append(pass, b...)
		bridged = append(bridged, s.Feed(c, i == len(chunks)-1)...)
	}
	for name, out := range map[string][]byte{"passthrough": pass, "bridge": bridged} {
		checkResponsesStream(t, out)
		if !bytes.Contains(out, []byte(openai.StreamEventTooLarge)) {
			t.Errorf("%s: want the too-large error, got %.300s", name, out)
		}
	}
}

// A chat chunk the bridge cannot decode ends the response with an error
// rather than vanishing.
func TestStreamUnreadableChunk(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"x","stream":true}`))
	s := NewStream(r, "resp_f", 1)
	out := s.Feed([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":99999999999999999999}]}}]}\n\n"), true)
	checkResponsesStream(t, out)
	if !bytes.Contains(out, []byte(`"type":"error"`)) || s.Output() != nil {
		t.Errorf("want an error event and no output, got %s", out)
	}
}
