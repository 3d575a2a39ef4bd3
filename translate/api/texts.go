package api

import (
	"encoding/json"
	"slices"

	"modelgate/translate"
)

// The client's text in a request of each API family, for rules that read
// extracted text rather than raw JSON (guardrails). The requests were
// validated when parsed; what does not decode here is left out. The
// writers of the same text are in masktexts.go: they decode what these
// do, with the same types, to find the same pieces.

// message is a chat or Messages API message as the readers decode it.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentPart is a part of a content array: its text is text when its
// type is one of those read.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// contentBlock is a Messages API content block: a text block's text, a
// tool_result's content.
type contentBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// ChatTexts is the text of a chat completions request's messages:
// system and developer messages are PartSystem, user messages PartUser,
// assistant messages PartAssistant (their content, not their tool
// calls), tool and function messages PartToolResult. Content is a string
// or text parts; image, audio and file parts are not text.
func ChatTexts(r *ChatRequest) []translate.RequestText {
	var msgs []message
	if json.Unmarshal(r.Members["messages"], &msgs) != nil {
		return nil
	}
	var out []translate.RequestText
	for _, m := range msgs {
		out = appendTexts(out, RolePart(m.Role), m.Content, "text")
	}
	return out
}

// RolePart is the part of the text of a message with role: system and
// developer messages are PartSystem, assistant messages PartAssistant,
// tool and function messages PartToolResult, the rest PartUser.
func RolePart(role string) translate.Part {
	switch role {
	case "system", "developer":
		return translate.PartSystem
	case "assistant":
		return translate.PartAssistant
	case "tool", "function":
		return translate.PartToolResult
	}
	return translate.PartUser
}

// turnPart is the part of the text of a Messages API turn with role:
// PartAssistant for the assistant's, else PartUser.
func turnPart(role string) translate.Part {
	if role == "assistant" {
		return translate.PartAssistant
	}
	return translate.PartUser
}

// MessagesTexts is the text of a Messages API request: its system
// (PartSystem), its messages' text blocks by their role (PartUser,
// PartAssistant), and the content of tool_result blocks
// (PartToolResult). tool_use inputs, thinking, images and documents are
// not text.
func MessagesTexts(r *MessagesRequest) []translate.RequestText {
	out := appendTexts(nil, translate.PartSystem, r.Members["system"], "text")
	var msgs []message
	if json.Unmarshal(r.Members["messages"], &msgs) != nil {
		return out
	}
	for _, m := range msgs {
		part := turnPart(m.Role)
		var blocks []contentBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			out = appendTexts(out, part, m.Content, "text") // a string
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				out = appendText(out, part, b.Text)
			case "tool_result":
				out = appendTexts(out, translate.PartToolResult, b.Content, "text")
			}
		}
	}
	return out
}

// appendTexts appends the text of content: a string, or an array of
// parts whose type is one of types (with their text member).
func appendTexts(out []translate.RequestText, part translate.Part, content json.RawMessage, types ...string) []translate.RequestText {
	if len(content) == 0 {
		return out
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return appendText(out, part, s)
	}
	var parts []contentPart
	if json.Unmarshal(content, &parts) != nil {
		return out
	}
	for _, p := range parts {
		if slices.Contains(types, p.Type) {
			out = appendText(out, part, p.Text)
		}
	}
	return out
}

// AppendTexts appends the text of content of the given part, as
// appendTexts does, for the other API families' packages (the Responses
// API's input_text and output_text parts).
func AppendTexts(out []translate.RequestText, part translate.Part, content json.RawMessage, types ...string) []translate.RequestText {
	return appendTexts(out, part, content, types...)
}

func appendText(out []translate.RequestText, part translate.Part, s string) []translate.RequestText {
	if s == "" {
		return out
	}
	return append(out, translate.RequestText{Part: part, Text: s})
}
