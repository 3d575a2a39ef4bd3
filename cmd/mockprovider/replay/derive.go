package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"modelgate/translate/api"
	"modelgate/translate/bedrock"
	"modelgate/translate/sse"
)

// Some provider/shape pairs were never recorded (an Anthropic stream with
// tool calls, Gemini and Bedrock tool calls as JSON, OpenAI's stream of a
// tool call recorded as JSON). The mock derives them
// mechanically from a recording of the other shape, in the provider's
// documented format, so that every provider can be exercised both ways.

// anthropicStream turns a recorded Message into its SSE event sequence.
func anthropicStream(rec recording) (recording, error) {
	var m struct {
		ID      string            `json:"id"`
		Model   string            `json:"model"`
		Content []json.RawMessage `json:"content"`
		Stop    string            `json:"stop_reason"`
		Usage   json.RawMessage   `json:"usage"`
	}
	if err := json.Unmarshal(rec.body, &m); err != nil {
		return rec, err
	}
	var out bytes.Buffer
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(&out, "event: %s\ndata: %s\n\n", typ, b)
	}
	event("message_start", map[string]any{"message": map[string]any{"id": m.ID, "type": "message", "role": "assistant",
		"model": m.Model, "content": []any{}, "usage": m.Usage}})
	for i, raw := range m.Content {
		var b struct {
			Type, Text, ID, Name string
			Input                json.RawMessage
		}
		json.Unmarshal(raw, &b) //nolint:errcheck // a recorded block
		switch b.Type {
		case "text":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b.Text}})
		case "tool_use":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(b.Input)}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": m.Stop}, "usage": m.Usage})
	event("message_stop", map[string]any{})
	return recording{status: rec.status, contentType: "text/event-stream; charset=utf-8", body: out.Bytes()}, nil
}

// geminiJSON merges a recorded streamGenerateContent into one response.
func geminiJSON(rec recording) (recording, error) {
	var dec sse.Decoder
	var parts []json.RawMessage
	var last map[string]json.RawMessage
	finish := ""
	for _, ev := range dec.Feed(rec.body) {
		var r struct {
			Candidates []struct {
				Content struct {
					Parts []json.RawMessage `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return rec, err
		}
		json.Unmarshal(ev.Data, &last) //nolint:errcheck // just decoded
		for _, c := range r.Candidates {
			parts = append(parts, c.Content.Parts...)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	out := map[string]any{"candidates": []any{map[string]any{"index": 0, "finishReason": finish,
		"content": map[string]any{"role": "model", "parts": parts}}}}
	for _, k := range []string{"usageMetadata", "modelVersion", "responseId"} {
		out[k] = last[k]
	}
	b, err := json.Marshal(out)
	return recording{status: rec.status, contentType: "application/json; charset=UTF-8", body: b}, err
}

// bedrockJSON assembles a Converse response from a recorded ConverseStream.
func bedrockJSON(rec recording) (recording, error) {
	var dec bedrock.Decoder
	msgs, err := dec.Feed(rec.body)
	if err != nil {
		return rec, err
	}
	var content []map[string]any
	var text strings.Builder
	var tool map[string]any
	var input strings.Builder
	out := map[string]any{}
	for _, m := range msgs {
		var ev map[string]json.RawMessage
		json.Unmarshal(m.Payload, &ev) //nolint:errcheck // a recorded frame
		switch m.Header(":event-type") {
		case "contentBlockStart":
			var start struct {
				Start struct{ ToolUse map[string]any }
			}
			json.Unmarshal(m.Payload, &start) //nolint:errcheck // a recorded frame
			tool = start.Start.ToolUse
		case "contentBlockDelta":
			var d struct {
				Delta struct {
					Text    *string
					ToolUse struct{ Input string }
				}
			}
			json.Unmarshal(m.Payload, &d) //nolint:errcheck // a recorded frame
			if d.Delta.Text != nil {
				text.WriteString(*d.Delta.Text)
			} else {
				input.WriteString(d.Delta.ToolUse.Input)
			}
		case "contentBlockStop":
			if tool != nil {
				tool["input"] = json.RawMessage(input.String())
				content = append(content, map[string]any{"toolUse": tool})
				tool = nil
				input.Reset()
			} else if text.Len() > 0 {
				content = append(content, map[string]any{"text": text.String()})
				text.Reset()
			}
		case "messageStop":
			out["stopReason"] = ev["stopReason"]
		case "metadata":
			out["usage"], out["metrics"] = ev["usage"], ev["metrics"]
		}
	}
	if text.Len() > 0 {
		content = append(content, map[string]any{"text": text.String()})
	}
	out["output"] = map[string]any{"message": map[string]any{"role": "assistant", "content": content}}
	b, err := json.Marshal(out)
	return recording{status: rec.status, contentType: "application/json", body: b}, err
}

// cohereFromOpenAI restates a recorded OpenAI chat completion as a Cohere
// v2 chat response: no Cohere tool call was recorded, and Cohere's v2
// message shape (role, tool_calls with function name and arguments) is the
// same as OpenAI's.
func cohereFromOpenAI(rec recording) (recording, error) {
	var c struct {
		ID      string `json:"id"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string           `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(rec.body, &c); err != nil || len(c.Choices) == 0 {
		return rec, fmt.Errorf("not a chat completion: %v", err)
	}
	ch := c.Choices[0]
	msg := map[string]any{"role": "assistant", "content": []any{}}
	finish := "COMPLETE"
	if len(ch.Message.ToolCalls) > 0 {
		msg["tool_calls"], finish = ch.Message.ToolCalls, "TOOL_CALL"
	}
	if ch.Message.Content != nil {
		msg["content"] = []any{map[string]any{"type": "text", "text": *ch.Message.Content}}
	}
	tokens := map[string]any{"input_tokens": c.Usage.PromptTokens, "output_tokens": c.Usage.CompletionTokens}
	b, err := json.Marshal(map[string]any{"id": c.ID, "finish_reason": finish, "message": msg,
		"usage": map[string]any{"billed_units": tokens, "tokens": tokens}})
	return recording{status: rec.status, contentType: "application/json", body: b}, err
}

// OpenAI chat streams. Two scenarios were recorded only as JSON: the tool
// call of mock-tools (openai/chat/chat-tools) and Ollama's answer
// (mock-ollama); a stream request for them gets chatStream's stream of the
// recorded answer. And OpenAI's recorded text stream (chat-streaming) was
// made without stream_options.include_usage, while the recorded stream
// with it (chat-streaming-detailed-usage) holds no text, its tokens all
// spent on reasoning: a stream request with include_usage (every one the
// gateway sends) gets the text stream ended by withUsage with that
// recording's usage chunk.

// chatStream turns a recorded chat.completion into the chat.completion.chunk
// stream OpenAI sends for it, shaped as OpenAI's recorded streams are
// (chat-streaming, test_run_stream_sync_streams_real_model): for each
// choice a chunk with the role, "content" ("" before text, null before a
// tool call), the first tool call's index, id, type and name with empty
// arguments when there is no text, and "refusal" when the answer has one;
// then the reasoning, the text and each tool call's arguments in
// token-sized pieces (a further tool call opening with its own id, type
// and name); then a chunk with an empty delta and the finish_reason.
// With includeUsage each chunk carries "usage":null and a last chunk with
// no choices carries the usage; then data: [DONE].
func chatStream(rec recording, includeUsage bool) (recording, error) {
	c, err := parseObject(rec.body)
	if err != nil {
		return rec, fmt.Errorf("not a chat completion: %w", err)
	}
	head := object{}
	for _, k := range []string{"id", "object", "created", "model", "service_tier", "system_fingerprint"} {
		if v, ok := c.get(k); ok {
			if k == "object" {
				v = json.RawMessage(`"chat.completion.chunk"`)
			}
			head = append(head, member{k, v})
		}
	}
	var out bytes.Buffer
	write := func(chunk object) error {
		b, err := api.Marshal(chunk)
		if err != nil {
			return err
		}
		out.WriteString("data: ")
		out.Write(b)
		out.WriteString("\n\n")
		return nil
	}
	emit := func(choice object) error {
		chunk := append(head[:len(head):len(head)], member{"choices", []object{choice}})
		if includeUsage {
			chunk = append(chunk, member{"usage", nil})
		}
		return write(chunk)
	}
	choicesRaw, _ := c.get("choices")
	var choices []json.RawMessage
	if err := json.Unmarshal(choicesRaw, &choices); err != nil || len(choices) == 0 {
		return rec, fmt.Errorf("not a chat completion: no choices")
	}
	for _, raw := range choices {
		ch, err := parseObject(raw)
		if err != nil {
			return rec, err
		}
		index, _ := ch.get("index")
		_, logprobs := ch.get("logprobs")
		choice := func(delta object, finish json.RawMessage) object {
			o := object{{"index", index}, {"delta", delta}}
			if logprobs {
				o = append(o, member{"logprobs", nil})
			}
			return append(o, member{"finish_reason", finish})
		}
		msgRaw, _ := ch.get("message")
		msg, err := parseObject(msgRaw)
		if err != nil {
			return rec, err
		}
		var calls []struct {
			ID       json.RawMessage `json:"id"`
			Type     json.RawMessage `json:"type"`
			Function struct {
				Name      json.RawMessage `json:"name"`
				Arguments string          `json:"arguments"`
			} `json:"function"`
		}
		if raw, ok := msg.get("tool_calls"); ok {
			json.Unmarshal(raw, &calls) //nolint:errcheck // a recorded answer; null has none
		}
		text := func(key string) string {
			var s string
			raw, _ := msg.get(key)
			json.Unmarshal(raw, &s) //nolint:errcheck // null or absent is no text
			return s
		}
		opening := func(i int) []object {
			c := calls[i]
			return []object{{{"index", i}, {"id", c.ID}, {"type", c.Type},
				{"function", object{{"name", c.Function.Name}, {"arguments", ""}}}}}
		}
		role, _ := msg.get("role")
		first := object{{"role", role}}
		content, _ := msg.get("content")
		var isText *string
		json.Unmarshal(content, &isText) //nolint:errcheck // null or absent is no text
		if isText != nil {
			first = append(first, member{"content", ""})
		} else {
			first = append(first, member{"content", nil})
		}
		opened := 0
		if text("content") == "" && len(calls) > 0 {
			first = append(first, member{"tool_calls", opening(0)})
			opened = 1
		}
		if _, ok := msg.get("refusal"); ok {
			first = append(first, member{"refusal", nil})
		}
		if err := emit(choice(first, nil)); err != nil {
			return rec, err
		}
		for _, key := range []string{"reasoning_content", "reasoning", "content", "refusal"} {
			for _, piece := range tokens(text(key)) {
				if err := emit(choice(object{{key, piece}}, nil)); err != nil {
					return rec, err
				}
			}
		}
		for i, call := range calls {
			if i >= opened {
				if err := emit(choice(object{{"tool_calls", opening(i)}}, nil)); err != nil {
					return rec, err
				}
			}
			for _, piece := range tokens(call.Function.Arguments) {
				delta := object{{"tool_calls", []object{{{"index", i}, {"function", object{{"arguments", piece}}}}}}}
				if err := emit(choice(delta, nil)); err != nil {
					return rec, err
				}
			}
		}
		finish, _ := ch.get("finish_reason")
		if err := emit(choice(object{}, finish)); err != nil {
			return rec, err
		}
	}
	if raw, ok := c.get("usage"); ok && includeUsage {
		usage, err := streamUsage(raw)
		if err != nil {
			return rec, err
		}
		chunk := append(head[:len(head):len(head)], member{"choices", []object{}}, member{"usage", usage})
		if err := write(chunk); err != nil {
			return rec, err
		}
	}
	out.WriteString("data: [DONE]\n\n")
	return recording{status: rec.status, contentType: "text/event-stream; charset=utf-8", body: out.Bytes()}, nil
}

// streamUsage is a completion's usage in the order of the members of
// OpenAI's streamed usage (a recorded completion may have them sorted).
func streamUsage(raw json.RawMessage) (object, error) {
	usage, err := parseObject(raw)
	if err != nil {
		return nil, err
	}
	usage = usage.ordered("prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details")
	for key, order := range map[string][]string{
		"prompt_tokens_details":     {"cached_tokens", "audio_tokens"},
		"completion_tokens_details": {"reasoning_tokens", "audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens"},
	} {
		if raw, ok := usage.get(key); ok {
			if details, err := parseObject(raw); err == nil {
				usage = usage.set(key, details.ordered(order...))
			}
		}
	}
	return usage, nil
}

// withUsage ends a recorded chat stream that has no usage chunk with the
// usage chunk of another recorded stream, given the stream's id and
// created, and gives each of the stream's chunks "usage":null after its
// choices: what OpenAI sends for stream_options.include_usage.
func withUsage(rec, from recording) (recording, error) {
	var usage object
	var dec sse.Decoder
	for _, ev := range dec.Feed(from.body) {
		if o, err := parseObject(ev.Data); err == nil {
			if u, ok := o.get("usage"); ok && string(u) != "null" {
				usage = o
			}
		}
	}
	if usage == nil {
		return rec, fmt.Errorf("no usage chunk to add")
	}
	var out bytes.Buffer
	var first object
	dec = sse.Decoder{}
	for _, ev := range dec.Feed(rec.body) {
		if string(ev.Data) == "[DONE]" {
			break
		}
		chunk, err := parseObject(ev.Data)
		if err != nil {
			return rec, err
		}
		if first == nil {
			first = chunk
		}
		chunk = chunk.insertAfter("choices", member{"usage", nil})
		b, err := api.Marshal(chunk)
		if err != nil {
			return rec, err
		}
		fmt.Fprintf(&out, "data: %s\n\n", b)
	}
	if first == nil {
		return rec, fmt.Errorf("an empty stream")
	}
	for _, k := range []string{"id", "created"} {
		v, _ := first.get(k)
		usage = usage.set(k, v)
	}
	b, err := api.Marshal(usage)
	if err != nil {
		return rec, err
	}
	fmt.Fprintf(&out, "data: %s\n\ndata: [DONE]\n\n", b)
	return recording{status: rec.status, contentType: rec.contentType, body: out.Bytes()}, nil
}

// tokens cuts text into pieces the size of the tokens OpenAI streams: a
// word or number with the spaces before it, or a run of other characters
// with the spaces before it (`{"country":"UK"}` streams as `{"`, `country`,
// `":"`, `UK`, `"}`). The pieces join to text.
func tokens(text string) []string {
	var out []string
	word := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	for text != "" {
		i := strings.IndexFunc(text, func(r rune) bool { return !unicode.IsSpace(r) })
		if i < 0 {
			out = append(out, text)
			break
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		kind := word(r)
		j := i + size
		for j < len(text) {
			r, size := utf8.DecodeRuneInString(text[j:])
			if unicode.IsSpace(r) || word(r) != kind {
				break
			}
			j += size
		}
		out = append(out, text[:j])
		text = text[j:]
	}
	return out
}

// member is one member of a JSON object; a recorded value stays a
// json.RawMessage.
type member struct {
	key   string
	value any
}

// object is a JSON object that keeps its members in order, as providers
// send them.
type object []member

// parseObject reads a JSON object, each member's value as recorded.
func parseObject(b []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	o := object{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o = append(o, member{t.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

// get returns the value of key, as recorded, and whether it is there.
func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			raw, ok := m.value.(json.RawMessage)
			if !ok {
				raw, _ = api.Marshal(m.value)
			}
			return raw, true
		}
	}
	return nil, false
}

// set replaces the value of key, or adds key last.
func (o object) set(key string, v any) object {
	o = append(object(nil), o...)
	for i := range o {
		if o[i].key == key {
			o[i].value = v
			return o
		}
	}
	return append(o, member{key, v})
}

// insertAfter adds m after the member key (last without it), unless o has
// m's key.
func (o object) insertAfter(key string, m member) object {
	if _, ok := o.get(m.key); ok {
		return o
	}
	i := len(o)
	for j := range o {
		if o[j].key == key {
			i = j + 1
		}
	}
	return append(o[:i:i], append(object{m}, o[i:]...)...)
}

// ordered puts the members named first, in that order, and then the
// others as they were.
func (o object) ordered(first ...string) object {
	out := make(object, 0, len(o))
	for _, k := range first {
		for _, m := range o {
			if m.key == k {
				out = append(out, m)
			}
		}
	}
	for _, m := range o {
		if !slices.Contains(first, m.key) {
			out = append(out, m)
		}
	}
	return out
}

// MarshalJSON writes the members in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := api.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := api.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
