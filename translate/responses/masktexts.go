package responses

import (
	"encoding/json"

	"modelgate/translate"
	"modelgate/translate/api"
)

// MapTexts calls f with each piece of r's text, as Texts returns them,
// and puts the text f returns in the piece's place (quoted as
// encoding/json quotes it; the rest of the request stays as sent). It
// reports whether anything changed: then r's instructions and input
// members, which the translators read (Items, ToChat, Passthrough), are
// edited. A stored conversation the request continues is not in it: see
// MapItemTexts.
func MapTexts(r *Request, f func(translate.RequestText) string) bool {
	instructions := api.MapTexts(r.Members["instructions"], translate.PartSystem, f)
	input := mapInput(r.Members["input"], f)
	changed := false
	for name, v := range map[string]json.RawMessage{"instructions": instructions, "input": input} {
		if v != nil {
			r.Members[name], changed = v, true
		}
	}
	return changed
}

// mapInput is the writer of Texts's input: a string, or items.
func mapInput(input json.RawMessage, f func(translate.RequestText) string) json.RawMessage {
	var s string
	if json.Unmarshal(input, &s) == nil {
		return api.MapTexts(input, translate.PartUser, f)
	}
	return api.MapElements(input, func(_ int, item json.RawMessage) json.RawMessage { return mapItem(item, f) })
}

// MapItemTexts calls f with each piece of the items' text, as ItemTexts
// returns them, and puts the text f returns in the piece's place: an
// item whose text changed is replaced in items by its edited copy. It
// reports whether any was.
func MapItemTexts(items []json.RawMessage, f func(translate.RequestText) string) bool {
	changed := false
	for i, item := range items {
		if v := mapItem(item, f); v != nil {
			items[i], changed = v, true
		}
	}
	return changed
}

// mapItem is the writer of one item's text: the item with the text f
// returns in place of each piece's, nil when it changed none.
func mapItem(raw json.RawMessage, f func(translate.RequestText) string) json.RawMessage {
	var it textItem
	if json.Unmarshal(raw, &it) != nil {
		return nil
	}
	switch it.Type {
	case "", "message":
		return api.MapField(raw, "content", api.MapTexts(it.Content, api.RolePart(it.Role), f, textTypes...))
	case "function_call_output", "custom_tool_call_output":
		return api.MapField(raw, "output", api.MapTexts(it.Output, translate.PartToolResult, f, textTypes...))
	}
	return nil
}
