package guard

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/responses"
	"modelgate/translate/sse"
)

// The client API's own refusal of an answer a rule blocked: chat's
// finish_reason content_filter, a Responses answer incomplete for
// content_filter, a Messages answer's stop_reason refusal. A JSON answer
// is rewritten without its text; a stream ends where the client is, with
// the events that close it in its API (refusal notes what the client
// got), and the output held is dropped.

// contentFilter is the finish reason (chat) and incomplete reason
// (Responses) of a blocked answer.
const contentFilter = "content_filter"

// refusal is what a stream's refusal needs of the events before it: the
// ids they share, and what the client got of them.
type refusal struct {
	chat     api.ChunkWriter // a chat stream's id, model and time
	chatSeen bool
	// start is a Messages stream's message_start (data), sent when the
	// client got it; open are its content blocks started and not stopped.
	start     []byte
	startSent bool
	open      []int
	// created is a Responses stream's response.created (data), sent when
	// the client got it; items are the output items the client got done;
	// seq is the next sequence number.
	created     []byte
	createdSent bool
	items       []json.RawMessage
	seq         int64
}

// note reads events of dialect d, released to the client or dropped by
// the refusal.
func (r *refusal) note(d translate.Dialect, raw []byte, released bool) {
	switch d {
	case translate.Chat:
		if r.chatSeen {
			return
		}
	case translate.Messages:
		if r.startSent && !bytes.Contains(raw, []byte("content_block_st")) {
			return
		}
	case translate.Responses:
		if released {
			r.noteSequence(raw)
		}
		if r.createdSent && !bytes.Contains(raw, []byte("response.output_item.done")) {
			return
		}
	default:
		return
	}
	var dec sse.Decoder
	for _, ev := range dec.Feed(bytes.Clone(raw)) {
		r.event(d, ev.Data, released)
	}
}

func (r *refusal) event(d translate.Dialect, data []byte, released bool) {
	var ev struct {
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		Model    string          `json:"model"`
		Created  int64           `json:"created"`
		Index    int             `json:"index"`
		Item     json.RawMessage `json:"item"`
		Response json.RawMessage `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch {
	case d == translate.Chat && !r.chatSeen && ev.ID != "":
		r.chat, r.chatSeen = api.ChunkWriter{ID: ev.ID, Model: ev.Model, Created: ev.Created}, true
	case ev.Type == "message_start" && !r.startSent:
		r.start, r.startSent = data, released
	case ev.Type == "content_block_start" && released:
		r.open = append(r.open, ev.Index)
	case ev.Type == "content_block_stop" && released:
		r.open = slices.DeleteFunc(r.open, func(i int) bool { return i == ev.Index })
	case ev.Type == "response.created" && !r.createdSent:
		r.created, r.createdSent = data, released
	case ev.Type == "response.output_item.done" && released && len(ev.Item) > 0:
		r.items = append(r.items, ev.Item)
	}
}

// noteSequence reads the last sequence number of released Responses
// events.
func (r *refusal) noteSequence(raw []byte) {
	const key = `"sequence_number":`
	i := bytes.LastIndex(raw, []byte(key))
	if i < 0 {
		return
	}
	j := i + len(key)
	for j < len(raw) && raw[j] == ' ' {
		j++
	}
	k := j
	for k < len(raw) && raw[k] >= '0' && raw[k] <= '9' {
		k++
	}
	if n, err := strconv.ParseInt(string(raw[j:k]), 10, 64); err == nil && n >= r.seq {
		r.seq = n + 1
	}
}

// refuse ends the answer a rule blocked: the refusal, in place of the
// output held.
func (a *Answer) refuse() []byte {
	if !a.stream {
		var whole []byte
		for _, seg := range a.held {
			whole = append(whole, seg.raw...)
		}
		a.held = nil
		return refuseJSON(a.dialect, whole)
	}
	for _, seg := range a.held {
		a.refusal.note(a.dialect, seg.raw, false)
	}
	a.held = nil
	u := a.usage()
	r := &a.refusal
	var out []byte
	switch a.dialect {
	case translate.Chat:
		reason := contentFilter
		out = r.chat.Chunk(out, api.ChatCompletionChunk{Choices: []api.ChunkChoice{{FinishReason: &reason}}})
		if a.includeUsage {
			out = r.chat.Usage(out, u)
		}
		out = append(out, api.DoneEvent...)
	case translate.Messages:
		if !r.startSent && r.start != nil {
			out = sse.AppendEvent(out, "message_start", r.start)
		}
		for _, i := range r.open {
			out = sse.AppendEvent(out, "content_block_stop", marshal(map[string]any{"type": "content_block_stop", "index": i}))
		}
		out = sse.AppendEvent(out, "message_delta", marshal(map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": "refusal", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": u.CompletionTokens}}))
		out = sse.AppendEvent(out, "message_stop", []byte(`{"type":"message_stop"}`))
	case translate.Responses:
		if !r.createdSent && r.created != nil {
			out = sse.AppendEvent(out, "response.created", r.created)
			r.noteSequence(r.created)
		}
		var created struct {
			Response map[string]json.RawMessage `json:"response"`
		}
		if json.Unmarshal(r.created, &created) != nil || created.Response == nil {
			created.Response = map[string]json.RawMessage{"object": json.RawMessage(`"response"`)}
		}
		resp := incomplete(created.Response, r.items)
		if u.TotalTokens > 0 {
			resp["usage"] = marshal(responses.Usage(u))
		}
		out = sse.AppendEvent(out, "response.incomplete", marshal(map[string]any{"type": "response.incomplete",
			"sequence_number": r.seq, "response": resp}))
	}
	return out
}

// refuseJSON is a whole answer of dialect d without its text, refused.
// An answer it cannot read becomes an empty refusal of its API.
func refuseJSON(d translate.Dialect, answer []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(answer, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	switch d {
	case translate.Chat:
		var choices []map[string]json.RawMessage
		json.Unmarshal(m["choices"], &choices) //nolint:errcheck // none is no choice
		if len(choices) == 0 {
			choices = []map[string]json.RawMessage{{"index": json.RawMessage("0")}}
		}
		for _, c := range choices {
			c["message"] = json.RawMessage(`{"role":"assistant","content":null,"refusal":null}`)
			c["finish_reason"] = marshal(contentFilter)
			c["logprobs"] = json.RawMessage("null")
		}
		m["choices"] = marshal(choices)
	case translate.Messages:
		m["content"] = json.RawMessage("[]")
		m["stop_reason"] = marshal("refusal")
		m["stop_sequence"] = json.RawMessage("null")
	case translate.Responses:
		m = incomplete(m, nil)
		delete(m, "output_text")
	}
	return marshal(m)
}

// incomplete is a Responses answer, resp, ended for content_filter with
// the output items the client got.
func incomplete(resp map[string]json.RawMessage, items []json.RawMessage) map[string]json.RawMessage {
	if items == nil {
		items = []json.RawMessage{}
	}
	resp["status"] = marshal("incomplete")
	resp["incomplete_details"] = marshal(map[string]string{"reason": contentFilter})
	resp["output"] = marshal(items)
	return resp
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: maps, strings, numbers and raw JSON read before
		panic(err)
	}
	return b
}
