package scripted

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
)

// converseRequest is the part of a Converse request the model reads.
type converseRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content []converseBlock `json:"content"`
	} `json:"messages"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice map[string]json.RawMessage `json:"toolChoice"`
	} `json:"toolConfig"`
	OutputConfig *struct {
		TextFormat struct {
			Structure struct {
				JSONSchema struct {
					Schema string `json:"schema"`
				} `json:"jsonSchema"`
			} `json:"structure"`
		} `json:"textFormat"`
	} `json:"outputConfig"`
	AdditionalModelRequestFields *struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
	} `json:"additionalModelRequestFields"`
}

type converseBlock struct {
	Text    string `json:"text,omitempty"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse,omitempty"`
	ToolResult *struct {
		Content []struct {
			Text string          `json:"text"`
			JSON json.RawMessage `json:"json"`
		} `json:"content"`
	} `json:"toolResult,omitempty"`
	ReasoningContent *struct {
		ReasoningText *struct {
			Text      string `json:"text"`
			Signature string `json:"signature"`
		} `json:"reasoningText"`
		RedactedContent string `json:"redactedContent"`
	} `json:"reasoningContent,omitempty"`
}

// Converse answers Bedrock's Converse and ConverseStream (stream, in
// AWS's binary event-stream) for a Claude model: thinking is on when
// additionalModelRequestFields asks for it, and is then checked as Claude
// checks it.
func Converse(w http.ResponseWriter, stream bool, body []byte) {
	var req converseRequest
	if err := json.Unmarshal(body, &req); err != nil {
		bedrockError(w, refuse("Malformed input request, please reformat your input and try again."))
		return
	}
	c := Conversation{InputChars: len(body)}
	if f := req.AdditionalModelRequestFields; f != nil && f.Thinking != nil {
		c.Reasoning = f.Thinking.Type == "enabled" || f.Thinking.Type == "adaptive"
	}
	if oc := req.OutputConfig; oc != nil {
		schema := oc.TextFormat.Structure.JSONSchema.Schema
		if !json.Valid([]byte(schema)) {
			bedrockError(w, refuse("The JSON schema in outputConfig.textFormat is not valid JSON."))
			return
		}
		c.Schema = json.RawMessage(schema)
	}
	if tc := req.ToolConfig; tc != nil {
		for _, t := range tc.Tools {
			if t.ToolSpec != nil {
				c.Tools = append(c.Tools, Tool{Name: t.ToolSpec.Name, Parameters: t.ToolSpec.InputSchema.JSON})
			}
		}
		_, anyTool := tc.ToolChoice["any"]
		_, named := tc.ToolChoice["tool"]
		c.MustCall = anyTool || named
		if c.MustCall && c.Reasoning {
			bedrockError(w, refuse("The model returned the following errors: Thinking may not be enabled when tool_choice forces tool use."))
			return
		}
	}
	last := -1
	for i, m := range req.Messages {
		if m.Role == "assistant" {
			last = i
		}
	}
	for i, m := range req.Messages {
		hasToolUse := false
		for j, b := range m.Content {
			switch {
			case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil && !Verify(b.ReasoningContent.ReasoningText.Text, b.ReasoningContent.ReasoningText.Signature):
				bedrockError(w, refuse("The model returned the following errors: messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j))
				return
			case b.ToolUse != nil:
				hasToolUse = true
			case m.Role == "user" && b.Text != "":
				c.Prompt, c.Results = b.Text, nil
			case b.ToolResult != nil:
				var out string
				for _, part := range b.ToolResult.Content {
					if part.JSON != nil {
						out += string(part.JSON)
					}
					out += part.Text
				}
				c.Results = append(c.Results, out)
			}
		}
		if i == last && c.Reasoning && hasToolUse && (len(m.Content) == 0 || m.Content[0].ReasoningContent == nil) {
			found := "tool_use"
			if len(m.Content) > 0 && m.Content[0].Text != "" {
				found = "text"
			}
			bedrockError(w, refuse("The model returned the following errors: messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", i, found))
			return
		}
	}
	t := Answer(c)
	t.cached(cacheUsage(converseSegments(body)))
	var content []map[string]any
	if t.Thinking != "" {
		content = append(content, map[string]any{"reasoningContent": map[string]any{"reasoningText": map[string]any{"text": t.Thinking, "signature": t.Signature}}})
	}
	stop := "end_turn"
	callID := newID("tooluse_scripted")
	if t.Call != nil {
		stop = "tool_use"
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": callID, "name": t.Call.Name, "input": json.RawMessage(t.Call.Arguments)}})
	} else {
		content = append(content, map[string]any{"text": t.Text})
	}
	usage := map[string]any{"inputTokens": t.InputTokens, "outputTokens": t.OutputTokens, "cacheReadInputTokens": t.CacheRead,
		"cacheWriteInputTokens": t.CacheWrite, "totalTokens": t.InputTokens + t.CacheRead + t.CacheWrite + t.OutputTokens}
	if t.CacheWrite > 0 {
		usage["cacheDetails"] = []map[string]any{{"ttl": "5m", "inputTokens": t.CacheWrite - t.CacheWrite1h}, {"ttl": "1h", "inputTokens": t.CacheWrite1h}}
	}
	if !stream {
		writeJSON(w, http.StatusOK, map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": stop, "usage": usage, "metrics": map[string]any{"latencyMs": 1}})
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	event := func(typ string, v any) {
		payload, _ := json.Marshal(v)
		w.Write(eventStreamMessage(typ, payload)) //nolint:errcheck // the client went away
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	event("messageStart", map[string]any{"role": "assistant"})
	i := 0
	if t.Thinking != "" {
		for _, p := range pieces(t.Thinking) {
			event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"reasoningContent": map[string]any{"text": p}}})
		}
		event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"reasoningContent": map[string]any{"signature": t.Signature}}})
		event("contentBlockStop", map[string]any{"contentBlockIndex": i})
		i++
	}
	if t.Call != nil {
		event("contentBlockStart", map[string]any{"contentBlockIndex": i, "start": map[string]any{"toolUse": map[string]any{"toolUseId": callID, "name": t.Call.Name}}})
		for _, p := range pieces(t.Call.Arguments) {
			event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"toolUse": map[string]any{"input": p}}})
		}
	} else {
		for _, p := range pieces(t.Text) {
			event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"text": p}})
		}
	}
	event("contentBlockStop", map[string]any{"contentBlockIndex": i})
	event("messageStop", map[string]any{"stopReason": stop})
	event("metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 1}})
}

// eventStreamMessage encodes one AWS event-stream message: the prelude
// (lengths and their CRC), string headers, the payload and the message
// CRC.
func eventStreamMessage(eventType string, payload []byte) []byte {
	var headers []byte
	for _, h := range [][2]string{{":event-type", eventType}, {":content-type", "application/json"}, {":message-type", "event"}} {
		headers = append(headers, byte(len(h[0])))
		headers = append(headers, h[0]...)
		headers = append(headers, 7)
		headers = binary.BigEndian.AppendUint16(headers, uint16(len(h[1])))
		headers = append(headers, h[1]...)
	}
	total := 12 + len(headers) + len(payload) + 4
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(headers)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, headers...)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func bedrockError(w http.ResponseWriter, err error) {
	w.Header().Set("X-Amzn-Errortype", "ValidationException")
	writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
}

// InvokeModel answers Bedrock's InvokeModel (invoke-with-response-stream
// for a stream) for Claude, which takes the Messages API's body with
// Bedrock's anthropic_version and neither model nor stream, as Bedrock
// requires: the model answers as on Anthropic (Messages), a stream's
// events each in an event-stream chunk frame (base64 JSON), message_stop
// with Bedrock's invocation metrics.
func InvokeModel(w http.ResponseWriter, stream bool, model string, body []byte) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		bedrockError(w, refuse("Malformed input request, please reformat your input and try again."))
		return
	}
	if string(m["anthropic_version"]) != `"bedrock-2023-05-31"` {
		bedrockError(w, refuse("Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again."))
		return
	}
	for _, key := range []string{"model", "stream"} {
		if _, ok := m[key]; ok {
			bedrockError(w, refuse("Malformed input request: #: extraneous key [%s] is not permitted, please reformat your input and try again.", key))
			return
		}
	}
	var betas []string
	json.Unmarshal(m["anthropic_beta"], &betas) //nolint:errcheck // none
	for _, b := range betas {
		if !slices.Contains(bedrockBetas, b) {
			bedrockError(w, refuse("The model returned the following errors: invalid beta flag"))
			return
		}
	}
	delete(m, "anthropic_version")
	delete(m, "anthropic_beta")
	m["model"], _ = json.Marshal(model)
	if stream {
		m["stream"] = json.RawMessage("true")
	}
	messagesBody, _ := json.Marshal(m)
	rec := httptest.NewRecorder()
	Messages(rec, messagesBody)
	if !stream || rec.Code != http.StatusOK {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes()) //nolint:errcheck // the client went away
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	for _, ev := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n") {
		_, data, ok := strings.Cut(ev, "data: ")
		if !ok {
			continue
		}
		if strings.Contains(data, `"type":"message_stop"`) {
			data = strings.TrimSuffix(data, "}") + `,"amazon-bedrock-invocationMetrics":{"inputTokenCount":1,"outputTokenCount":1,"invocationLatency":1,"firstByteLatency":1}}`
		}
		payload, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString([]byte(data))})
		w.Write(eventStreamMessage("chunk", payload)) //nolint:errcheck // the client went away
	}
}

// bedrockBetas are the betas Bedrock documents for Claude on InvokeModel;
// it refuses others.
var bedrockBetas = []string{"computer-use-2024-10-22", "computer-use-2025-01-24", "token-efficient-tools-2025-02-19",
	"interleaved-thinking-2025-05-14", "output-128k-2025-02-19", "dev-full-thinking-2025-05-14", "context-1m-2025-08-07",
	"context-management-2025-06-27", "effort-2025-11-24", "tool-search-tool-2025-10-19", "tool-examples-2025-10-29"}

// CountTokens answers Bedrock's CountTokens for Claude: the InvokeModel
// body, base64 in input.invokeModel.body, checked as InvokeModel checks
// it, counted a token per four bytes.
func CountTokens(w http.ResponseWriter, body []byte) {
	var req struct {
		Input struct {
			InvokeModel *struct {
				Body []byte `json:"body"` // base64 in JSON
			} `json:"invokeModel"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Input.InvokeModel == nil {
		bedrockError(w, refuse("1 validation error detected: Value at 'input' failed to satisfy constraint"))
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(req.Input.InvokeModel.Body, &m) != nil || string(m["anthropic_version"]) != `"bedrock-2023-05-31"` {
		bedrockError(w, refuse("Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again."))
		return
	}
	if _, ok := m["max_tokens"]; !ok {
		bedrockError(w, refuse("Malformed input request: #: required key [max_tokens] not found, please reformat your input and try again."))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"inputTokens": max(1, len(req.Input.InvokeModel.Body)/4)})
}
