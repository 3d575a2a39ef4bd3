package responses

import (
	"encoding/json"
	"errors"

	"modelgate/translate/api"
)

var errNoChoice = errors.New("the chat completion has no choice")

// FromChat turns a chat.completion (the client-facing output of a
// provider's chat translator) into the Response object for r. id is the
// response's id and created its creation time.
func FromChat(r *Request, chatJSON []byte, id string, created int64) ([]byte, error) {
	return fromChat(r, chatJSON, id, created, 0)
}

// fromChat is FromChat with the prompt tokens the provider wrote to its
// cache, which the chat completion has no place for.
func fromChat(r *Request, chatJSON []byte, id string, created int64, writes int64) ([]byte, error) {
	var c api.ChatCompletion
	if err := json.Unmarshal(chatJSON, &c); err != nil {
		return nil, err
	}
	if len(c.Choices) == 0 {
		return nil, errNoChoice
	}
	resp := skeleton(r, id, created)
	resp["output"] = outputItems(r.tools, id, c)
	status, details := statusOf(c.Choices[0].FinishReason)
	resp["status"], resp["incomplete_details"] = status, details
	resp["usage"] = responsesUsage(c.Usage, writes)
	return json.Marshal(resp)
}

// statusOf maps a finish reason to the response status.
func statusOf(finish string) (string, any) {
	switch finish {
	case "length":
		return "incomplete", map[string]string{"reason": "max_output_tokens"}
	case "content_filter":
		return "incomplete", map[string]string{"reason": "content_filter"}
	}
	return "completed", nil
}

// skeleton holds the members every Response carries, echoed from the
// request with OpenAI's defaults. Its model is the one the client asked
// for, whatever id the provider knows it by: clients compare the two.
func skeleton(r *Request, id string, created int64) map[string]any {
	m := r.Members
	echo := func(name string, def any) any {
		if raw := m[name]; !isNull(raw) {
			return raw
		}
		return def
	}
	return map[string]any{
		"id": id, "object": "response", "created_at": created, "model": r.Model, "error": nil,
		"instructions": echo("instructions", nil), "metadata": echo("metadata", map[string]any{}),
		"parallel_tool_calls": echo("parallel_tool_calls", true), "temperature": echo("temperature", 1.0),
		"top_p": echo("top_p", 1.0), "tool_choice": echo("tool_choice", "auto"), "tools": echoTools(m["tools"]),
		"max_output_tokens": echo("max_output_tokens", nil), "previous_response_id": echo("previous_response_id", nil),
		"store": r.Store, "truncation": echo("truncation", "disabled"),
		"text": echo("text", map[string]any{"format": map[string]string{"type": "text"}}),
	}
}

// outputItems are reasoning, the message and tool calls, in that order,
// with ids derived from the response id.
func outputItems(tools toolset, id string, c api.ChatCompletion) []any {
	msg := c.Choices[0].Message
	out := []any{}
	if msg.ReasoningContent != "" || len(msg.ThinkingBlocks) > 0 {
		out = append(out, reasoningItem(outputID("rs_", id, -1), msg.ReasoningContent, msg.ThinkingBlocks))
	}
	var parts []any
	if msg.Content != nil && *msg.Content != "" {
		annotations := []any{}
		for _, a := range msg.Annotations {
			c := a.URLCitation
			annotations = append(annotations, map[string]any{"type": "url_citation", "url": c.URL, "title": c.Title, "start_index": c.StartIndex, "end_index": c.EndIndex})
		}
		parts = append(parts, map[string]any{"type": "output_text", "text": *msg.Content, "annotations": annotations, "logprobs": []any{}})
	}
	if msg.Refusal != nil && *msg.Refusal != "" {
		parts = append(parts, refusalPart(*msg.Refusal))
	}
	if len(parts) > 0 {
		out = append(out, map[string]any{"type": "message", "id": outputID("msg_", id, -1), "status": "completed", "role": "assistant", "content": parts})
	}
	for i, tc := range msg.ToolCalls {
		t := tools.call(tc.Function.Name)
		out = append(out, callItem(t, callItemID(t, id, i), tc.ID, tc.Function.Arguments, "completed"))
	}
	return out
}

// callItem is the output item of the model's call of a client tool: a
// function_call, or a custom_tool_call with the input its function's
// arguments hold.
func callItem(t clientTool, id, callID, arguments, status string) map[string]any {
	var it map[string]any
	if t.kind == customTool {
		it = map[string]any{"type": "custom_tool_call", "id": id, "call_id": callID,
			"name": t.name, "input": customInput(arguments), "status": status}
	} else {
		it = map[string]any{"type": "function_call", "id": id, "call_id": callID,
			"name": t.name, "arguments": arguments, "status": status}
	}
	if t.namespace != "" {
		it["namespace"] = t.namespace
	}
	return it
}

// echoTools echoes the request's tools with the members a Response's
// function tools always carry: description (null when absent) and strict
// (false when absent: the gateway does not enforce strict schemas).
func echoTools(raw json.RawMessage) []map[string]any {
	tools := []map[string]any{}
	if json.Unmarshal(raw, &tools) != nil {
		return []map[string]any{}
	}
	for _, t := range tools {
		if t["type"] != "function" {
			continue
		}
		if _, ok := t["description"]; !ok {
			t["description"] = nil
		}
		if _, ok := t["strict"]; !ok {
			t["strict"] = false
		}
	}
	return tools
}
