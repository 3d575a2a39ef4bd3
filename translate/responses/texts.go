package responses

import (
	"encoding/json"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Texts is the client's text in a Responses API request: its
// instructions (PartSystem); its input, a string (PartUser) or items
// (ItemTexts). A stored conversation the request continues
// (previous_response_id) is not in the request: see ItemTexts.
func Texts(r *Request) []translate.RequestText {
	out := api.AppendTexts(nil, translate.PartSystem, r.Members["instructions"])
	input := r.Members["input"]
	var s string
	if json.Unmarshal(input, &s) == nil {
		return api.AppendTexts(out, translate.PartUser, input)
	}
	var items []json.RawMessage
	if json.Unmarshal(input, &items) != nil {
		return out
	}
	return append(out, ItemTexts(items)...)
}

// textItem is an input item as ItemTexts and its writer, MapItemTexts,
// decode it.
type textItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

// textTypes are the types of the content parts that are text.
var textTypes = []string{"input_text", "output_text"}

// ItemTexts is the client's text in input items (a request's, or a
// stored conversation's): messages by their role (user PartUser; system
// and developer PartSystem; assistant PartAssistant) with their
// input_text and output_text parts, and the outputs of the client's
// function and custom tool calls (PartToolResult). Tool calls'
// arguments, reasoning items, images and files are not text.
func ItemTexts(items []json.RawMessage) []translate.RequestText {
	var out []translate.RequestText
	for _, raw := range items {
		var it textItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it.Type {
		case "", "message":
			out = api.AppendTexts(out, api.RolePart(it.Role), it.Content, textTypes...)
		case "function_call_output", "custom_tool_call_output":
			out = api.AppendTexts(out, translate.PartToolResult, it.Output, textTypes...)
		}
	}
	return out
}
