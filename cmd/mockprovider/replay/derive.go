package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"modelgate/translate/bedrock"
	"modelgate/translate/sse"
)

// Some provider/shape pairs were never recorded (an Anthropic stream with
// tool calls, Gemini and Bedrock tool calls as JSON). The mock derives them
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
