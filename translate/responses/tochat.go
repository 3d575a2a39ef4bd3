package responses

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"modelgate/translate/api"
)

// item is an input item, as far as the bridge reads it.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Namespace string          `json:"namespace"`
	Output    json.RawMessage `json:"output"`
	// EncryptedContent is a reasoning item's.
	EncryptedContent string `json:"encrypted_content"`
}

// unreplayed are the input items a chat model is not sent: OpenAI's
// compactions, which only OpenAI reads, and calls of tools OpenAI runs,
// which a bridged request leaves out (tools.go), and their results.
// (Reasoning items restore the provider's thinking: thinking.go.)
var unreplayed = map[string]bool{
	"compaction": true, "web_search_call": true, "file_search_call": true,
	"code_interpreter_call": true, "image_generation_call": true, "mcp_list_tools": true, "mcp_call": true,
	"mcp_approval_request": true, "mcp_approval_response": true, "tool_search_call": true, "tool_search_output": true,
	"additional_tools": true, // its tools join the request's (addItemTools)
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	// FileData, FileID, FileURL and Filename are an input_file's.
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	FileURL  string `json:"file_url"`
	Filename string `json:"filename"`
}

// chat is the chat completions request under construction: its members
// as api.ParseChatRequest reads them, and its messages.
type chat struct {
	members  map[string]any
	messages []json.RawMessage
}

// chatMembers are the Responses members that pass to the chat request
// as they are, under their chat names.
var chatMembers = []struct{ responses, chat string }{
	{"max_output_tokens", "max_completion_tokens"}, {"temperature", "temperature"}, {"top_p", "top_p"},
	{"parallel_tool_calls", "parallel_tool_calls"}, {"user", "user"},
}

// Items returns the request's input as items: a string input is one user
// message.
func (r *Request) Items() ([]json.RawMessage, error) {
	raw := r.Members["input"]
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": s})
		return []json.RawMessage{b}, nil
	}
	var items []json.RawMessage
	err := json.Unmarshal(raw, &items)
	return items, err
}

// Option sets what the target allows a bridged request.
type Option func(*options)

type options struct{ webSearch bool }

// WebSearch(true): the model may search the web with its provider's own
// search (translate.Target.WebSearch), so a web_search tool becomes the
// chat request's web_search_options rather than being left out.
func WebSearch(on bool) Option { return func(o *options) { o.webSearch = on } }

func optionsOf(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// ToChat builds the chat completions request for the provider translators:
// instructions, then history (the items of earlier turns, from the
// conversation store), then this request's input.
func ToChat(r *Request, history []json.RawMessage, opts ...Option) (*api.ChatRequest, error) {
	m := r.Members
	c := chat{members: map[string]any{"model": r.Model}}
	if r.Stream {
		c.members["stream"] = true
		c.members["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	}
	for _, cm := range chatMembers {
		if raw := m[cm.responses]; len(raw) > 0 {
			c.members[cm.chat] = raw
		}
	}
	var instructions string
	if json.Unmarshal(m["instructions"], &instructions) == nil && instructions != "" {
		b, _ := json.Marshal(map[string]string{"role": "system", "content": instructions})
		c.messages = append(c.messages, b)
	}
	input, err := r.Items()
	if err != nil {
		return nil, &api.RequestError{Param: "input", Code: "invalid_type", Message: "Invalid 'input'."}
	}
	items, _ := withSummaries(append(append([]json.RawMessage(nil), history...), input...))
	if items, err = resolveReferences(items, len(history)); err != nil {
		return nil, err
	}
	if err := c.addItems(items, min(len(history), len(items))); err != nil {
		return nil, err
	}
	if err := r.addItemTools(items, len(history)); err != nil {
		return nil, err
	}
	if err := c.setTools(r); err != nil {
		return nil, err
	}
	if ws := r.tools.webSearch; ws != nil && optionsOf(opts).webSearch {
		c.members["web_search_options"] = ws
	}
	c.setReasoningAndFormat(m)
	c.members["messages"] = c.messages
	body, err := json.Marshal(c.members)
	if err != nil {
		return nil, err
	}
	req, err := api.ParseChatRequest(body)
	return req, responsesError(err)
}

// addItems turns items into messages; consecutive function calls become
// one assistant message with several tool calls. The first stored items
// are the history, the stored conversation previous_response_id names;
// the others are the request's input.
func (c *chat) addItems(items []json.RawMessage, stored int) error {
	var calls []map[string]any
	// thinking is the provider's thinking a reasoning item restores to the
	// assistant turn after it (thinking.go).
	var thinking []api.ThinkingBlock
	flush := func() {
		if len(calls) > 0 {
			m := map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
			if len(thinking) > 0 {
				m["thinking_blocks"], thinking = thinking, nil
			}
			b, _ := json.Marshal(m)
			c.messages, calls = append(c.messages, b), nil
		}
	}
	for i, raw := range items {
		param := fmt.Sprintf("input[%d]", i-stored)
		if i < stored {
			param = "previous_response_id"
		}
		var it item
		if err := json.Unmarshal(raw, &it); err != nil {
			return api.Invalid(param, "Invalid input item.")
		}
		switch {
		case it.Type == "function_call":
			calls = append(calls, map[string]any{"id": it.CallID, "type": "function",
				"function": map[string]any{"name": qualified(it.Namespace, it.Name), "arguments": it.Arguments}})
			continue
		case it.Type == "custom_tool_call":
			args, _ := json.Marshal(map[string]string{"input": it.Input})
			calls = append(calls, map[string]any{"id": it.CallID, "type": "function",
				"function": map[string]any{"name": qualified(it.Namespace, it.Name), "arguments": string(args)}})
			continue
		case it.Type == "reasoning":
			flush()
			blocks, _ := unsealThinking(it.EncryptedContent)
			thinking = append(thinking, blocks...)
			continue
		case unreplayed[it.Type]:
			continue
		}
		flush()
		msg, err := message(param, it)
		if err != nil {
			return err
		}
		if it.Role == "assistant" && len(thinking) > 0 {
			var m map[string]any
			json.Unmarshal(msg, &m) //nolint:errcheck // just marshaled
			m["thinking_blocks"], thinking = thinking, nil
			msg, _ = json.Marshal(m)
		}
		c.messages = append(c.messages, msg)
	}
	flush()
	return nil
}

func message(param string, it item) (json.RawMessage, error) {
	switch {
	case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
		return json.Marshal(map[string]any{"role": "tool", "tool_call_id": it.CallID, "content": toolOutput(it.Output)})
	case it.Type == "message" || it.Type == "" && it.Role != "":
		content, err := chatContent(param, it.Role == "assistant", it.Content)
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"role": it.Role, "content": content})
	}
	return nil, api.Invalid(param+".type", "Unsupported input item type '%s'.", it.Type)
}

// resolveReferences resolves the item_references in items, whose first
// stored items are the history previous_response_id continues: a
// reference to an item of it is that item, which the conversation holds
// already, and goes; a reference to an item of the request's own input is
// a copy of it. The gateway finds stored items by the response they
// belong to, so a reference to any other item is the client's error.
func resolveReferences(items []json.RawMessage, stored int) ([]json.RawMessage, error) {
	var at map[string]int // item index by id
	out, size := items[:0:0], 0
	for i, raw := range items {
		if size += len(raw); size > MaxResolvedInput {
			return nil, errResolvedTooLarge()
		}
		var ref struct{ Type, ID string }
		if !bytes.Contains(raw, []byte("item_reference")) || json.Unmarshal(raw, &ref) != nil || ref.Type != "item_reference" {
			out = append(out, raw)
			continue
		}
		if at == nil {
			at = map[string]int{}
			for j, it := range items {
				var has struct{ Type, ID string }
				if json.Unmarshal(it, &has) == nil && has.ID != "" && has.Type != "item_reference" {
					at[has.ID] = j
				}
			}
		}
		j, ok := at[ref.ID]
		switch {
		case !ok || ref.ID == "":
			return nil, api.Invalid(fmt.Sprintf("input[%d].id", i-stored), "Item with id '%s' not found in the conversation.", ref.ID)
		case j >= stored:
			if size += len(items[j]); size > MaxResolvedInput {
				return nil, errResolvedTooLarge()
			}
			out = append(out, items[j])
		}
	}
	return out, nil
}

// toolOutput is a tool call's output as a tool message's text: a string
// as it is, the text of an array of content parts (its images and files
// left out: a chat tool message holds text only), anything else as JSON.
func toolOutput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []contentPart
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "output_text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// chatContent maps input_text/output_text/input_image/input_file parts to
// chat parts, and an assistant's refusal (which the gateway answers with,
// and the client sends back) to its text: the providers the bridge serves
// have no refusal of their own, and their chat translators read an
// assistant turn's content only (chat's refusal member would be lost), so
// the refusal's text is the turn the model is told it wrote.
func chatContent(param string, assistant bool, raw json.RawMessage) (any, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if json.Unmarshal(raw, &parts) != nil {
		return nil, api.Invalid(param+".content", "Expected a string or an array of content parts.")
	}
	var out []map[string]any
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case "refusal":
			if !assistant {
				return nil, unsupportedPart(param, j, p.Type)
			}
			out = append(out, map[string]any{"type": "text", "text": p.Refusal})
		case "input_image":
			out = append(out, map[string]any{"type": "image_url", "image_url": map[string]string{"url": p.ImageURL}})
		case "input_file":
			if p.FileURL != "" && p.FileData == "" {
				return nil, api.Invalid(fmt.Sprintf("%s.content[%d].file_url", param, j), "The gateway does not fetch files for this provider; send the file as file_data.")
			}
			file := map[string]string{}
			for k, v := range map[string]string{"file_data": p.FileData, "file_id": p.FileID, "filename": p.Filename} {
				if v != "" {
					file[k] = v
				}
			}
			out = append(out, map[string]any{"type": "file", "file": file})
		default:
			return nil, unsupportedPart(param, j, p.Type)
		}
	}
	return out, nil
}

func unsupportedPart(param string, j int, typ string) error {
	return api.Invalid(fmt.Sprintf("%s.content[%d].type", param, j), "Unsupported content part '%s'.", typ)
}

// setTools sets the chat tools the request's tools are offered as
// (tools.go) and the tool choice.
func (c *chat) setTools(r *Request) error {
	if len(r.tools.chat) == 0 {
		return nil // no tool to choose: a choice would refuse the request
	}
	c.members["tools"] = r.tools.chat
	return c.setToolChoice(r.Members["tool_choice"])
}

// setToolChoice maps a Responses tool choice: a mode as it is, a function
// or custom tool by the function the model knows it by, allowed_tools as
// its mode, and one of the tools left out (hosted tools) as auto.
func (c *chat) setToolChoice(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c.members["tool_choice"] = raw
		return nil
	}
	var choice struct{ Type, Name, Mode string }
	if json.Unmarshal(raw, &choice) != nil || choice.Type == "" {
		return api.Invalid("tool_choice", "Invalid 'tool_choice'.")
	}
	switch choice.Type {
	case "function", "custom":
		if choice.Name == "" {
			return api.Invalid("tool_choice", "Invalid 'tool_choice'.")
		}
		c.members["tool_choice"] = map[string]any{"type": "function", "function": map[string]string{"name": choice.Name}}
	case "allowed_tools":
		c.members["tool_choice"] = cmp.Or(choice.Mode, "auto")
	default:
		c.members["tool_choice"] = "auto"
	}
	return nil
}

// setReasoningAndFormat maps reasoning.effort and text.format.
func (c *chat) setReasoningAndFormat(m map[string]json.RawMessage) {
	var reasoning struct{ Effort string }
	if json.Unmarshal(m["reasoning"], &reasoning) == nil && reasoning.Effort != "" {
		c.members["reasoning_effort"] = reasoning.Effort
	}
	var text struct {
		Format struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	}
	if json.Unmarshal(m["text"], &text) != nil {
		return
	}
	switch f := text.Format; f.Type {
	case "json_object":
		c.members["response_format"] = json.RawMessage(`{"type":"json_object"}`)
	case "json_schema":
		c.members["response_format"] = map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}}
	}
}
