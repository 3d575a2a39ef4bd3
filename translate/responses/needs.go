package responses

import (
	"bytes"
	"encoding/json"
	"maps"

	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
)

// Needs is what the request uses of its model (api.Needs says why it is
// read), with history, the stored conversation previous_response_id
// continues, whose images and files the provider gets again:
//
//   - input_image, input_audio and input_file parts in the content of any
//     item or in a tool call's output, a computer call's screenshot, and
//     the prompt's variables of those kinds;
//   - tools of any kind, and those of additional_tools items;
//   - a text.format of type json_schema;
//   - reasoning, unless its effort is "none" (its effort is Needs'
//     Effort), or the encrypted reasoning in include, which only a
//     reasoning model has;
//   - max_output_tokens.
//
// An item_reference is read as the item it names once Dereference put it
// in the input.
func (r *Request) Needs(history []json.RawMessage) api.Needs {
	m := r.Members
	var uses api.CapSet
	for _, it := range history {
		itemInputs(&uses, it)
	}
	if input := m["input"]; mayHoldInput(input) {
		eachEntry(input, func(it []byte) { itemInputs(&uses, it) })
	}
	if vars := api.Field(m["prompt"], "variables"); jsonscan.Kind(vars) == jsonscan.Object {
		eachEntry(vars, func(v []byte) { partInput(&uses, v) })
	}
	if api.NonEmpty(m["tools"]) || r.itemTools(history) {
		uses.Add(api.CapTools)
	}
	if isSchema(m["text"]) {
		uses.Add(api.CapJSONSchema)
	}
	if reasoningAsks(m["reasoning"]) || includesReasoning(m["include"]) {
		uses.Add(api.CapReasoning)
	}
	return uses.Needs(api.EffortOf(api.Field(m["reasoning"], "effort")), api.PositiveInteger(m, "max_output_tokens"))
}

// itemFields are the members of an input item that hold parts: a
// message's content, a tool call's output.
var itemFields = [...]string{"content", "output"}

// itemInputs adds to uses what an input item sends of other kinds than
// text. Most items have none, which a search of their bytes tells.
func itemInputs(uses *api.CapSet, item []byte) {
	if !mayHoldInput(item) {
		return
	}
	var v [len(itemFields)][]byte
	api.Fields(item, itemFields[:], v[:])
	for _, parts := range v {
		if jsonscan.Kind(parts) == jsonscan.Object { // a computer call's screenshot
			partInput(uses, parts)
			continue
		}
		eachEntry(parts, func(p []byte) { partInput(uses, p) })
	}
}

// partInput adds to uses what a content part sends of other kinds than
// text.
func partInput(uses *api.CapSet, part []byte) {
	switch typ := api.Field(part, "type"); {
	case api.IsString(typ, "input_image"), api.IsString(typ, "computer_screenshot"):
		uses.Add(api.CapImage)
	case api.IsString(typ, "input_audio"):
		uses.Add(api.CapAudio)
	case api.IsString(typ, "input_file"):
		uses.Add(api.CapFile)
	}
}

// mayHoldInput reports whether raw may hold a part that is no text: it
// has one of their types (input_image, computer_screenshot, input_audio,
// input_file), or an escape, which may spell one otherwise.
func mayHoldInput(raw []byte) bool {
	return api.Underscored(raw, `image"`, `screenshot"`, `audio"`, `file"`) || bytes.Contains(raw, []byte(`\u`))
}

// eachEntry calls f with each element of the JSON array doc, or each
// member's value of the object doc; not at all for another value.
func eachEntry(doc []byte, f func(v []byte)) {
	it, ok := jsonscan.Entries(doc, jsonscan.SkipSpace(doc, 0))
	if !ok {
		return
	}
	for {
		e, more := it.Next()
		if !more {
			return
		}
		f(e.Value)
	}
}

// isSchema reports whether text, a request's text options, asks for JSON
// schema output.
func isSchema(text []byte) bool {
	return api.IsString(api.Field(api.Field(text, "format"), "type"), "json_schema")
}

// reasoningAsks reports whether a request's reasoning asks for
// reasoning: set, without effort "none".
func reasoningAsks(v []byte) bool {
	return !jsonscan.IsNull(v) && !api.IsString(api.Field(v, "effort"), "none")
}

// encryptedReasoning is what include asks for to get the reasoning back
// in a response, to send it again (as Codex does with store false).
const encryptedReasoning = "reasoning.encrypted_content"

func includesReasoning(include []byte) bool {
	found := false
	if jsonscan.Kind(jsonscan.TrimSpace(include)) == jsonscan.Array {
		eachEntry(include, func(e []byte) { found = found || isEncryptedReasoning(e) })
	}
	return found
}

func isEncryptedReasoning(entry []byte) bool { return api.IsString(entry, encryptedReasoning) }

// Without is the request without what drop names, and what it lost: for
// reasoning its reasoning and the encrypted reasoning in include; for
// tools its tools, tool_choice, parallel_tool_calls and max_tool_calls;
// for JSON schema output its text.format (the rest of text stays). It
// leaves out only what the request uses (Needs), every other member kept
// byte for byte, and is the request itself when it loses nothing. drop
// may name only what is api.Capability.Droppable.
//
// Reasoning items in the input stay (a provider that takes no reasoning
// ignores them, or the bridge makes thinking of them), and so do tool
// calls and their outputs when tools go: serving such a conversation
// without tools is for the models of providers that take it.
func (r *Request) Without(drop []api.Capability, history []json.RawMessage) (*Request, api.LeftOut, error) {
	set, err := api.ToDrop(drop)
	if err != nil {
		return nil, nil, err
	}
	m := r.Members
	replace := map[string]json.RawMessage{} // nil leaves the member out
	var left api.LeftOut
	if set.Has(api.CapReasoning) {
		if reasoningAsks(m["reasoning"]) {
			replace["reasoning"], left = nil, append(left, "reasoning")
		}
		if include, found := api.WithoutEntries(m["include"], isEncryptedReasoning); found {
			replace["include"], left = emptyAsNil(include, "[]"), append(left, "include "+encryptedReasoning)
		}
	}
	itemTools := false
	if set.Has(api.CapTools) && (api.NonEmpty(m["tools"]) || r.itemTools(history)) {
		for _, name := range []string{"tools", "tool_choice", "parallel_tool_calls", "max_tool_calls"} {
			if !jsonscan.IsNull(m[name]) {
				replace[name], left = nil, append(left, name)
			}
		}
		if itemTools = r.itemTools(history); itemTools {
			if input, found := api.WithoutEntries(m["input"], isItemTools); found {
				replace["input"] = input
			}
			left = append(left, "additional_tools")
		}
	}
	if set.Has(api.CapJSONSchema) && isSchema(m["text"]) {
		replace["text"], left = emptyAsNil(api.WithoutFields(m["text"], "format"), "{}"), append(left, "text.format")
	}
	if len(left) == 0 {
		return r, nil, nil
	}
	out := *r
	out.Members = maps.Clone(m)
	for name, v := range replace {
		if v == nil {
			delete(out.Members, name)
		} else {
			out.Members[name] = v
		}
	}
	if _, ok := replace["tools"]; ok {
		out.tools, _ = parseTools(nil) // none: it cannot fail
	}
	out.noItemTools = out.noItemTools || itemTools
	return &out, left, nil
}

// itemTools reports whether the conversation, history then input, has
// additional_tools items offering tools (Codex's code mode), unless the
// request goes without them.
func (r *Request) itemTools(history []json.RawMessage) bool {
	if r.noItemTools {
		return false
	}
	for _, it := range history {
		if isItemTools(it) {
			return true
		}
	}
	found := false
	if input := r.Members["input"]; bytes.Contains(input, []byte(additionalTools)) {
		eachEntry(input, func(it []byte) { found = found || isItemTools(it) })
	}
	return found
}

const additionalTools = "additional_tools"

// isItemTools reports an additional_tools item that offers tools. Most
// items are not, which a search of their bytes tells.
func isItemTools(item []byte) bool {
	return bytes.Contains(item, []byte(additionalTools)) && api.IsString(api.Field(item, "type"), additionalTools) &&
		api.NonEmpty(api.Field(item, "tools"))
}

// emptyAsNil is v, or nil when it is empty (an object or array with
// nothing left in it): then the member goes too.
func emptyAsNil(v json.RawMessage, empty string) json.RawMessage {
	if string(v) == empty {
		return nil
	}
	return v
}
