package responses

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// ItemPrefix is the id prefix of an item type, as OpenAI's ids have.
func ItemPrefix(typ string) string {
	switch typ {
	case "message":
		return "msg_"
	case "function_call":
		return "fc_"
	case "function_call_output":
		return "fco_"
	case "reasoning":
		return "rs_"
	}
	return "item_"
}

// WithItemIDs gives the first n items (the input of a response about to be
// stored) the ids input_items lists them by, where they have none: messages,
// function calls and their outputs, the items a provider serving Responses
// gets replayed without ids. A message given as just a role and content
// becomes one of type message. newID makes an id with a prefix.
func WithItemIDs(items []json.RawMessage, n int, newID func(prefix string) string) []json.RawMessage {
	out := slices.Clone(items)
	for i := range min(n, len(out)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(out[i], &m) != nil || m == nil || stringOf(m["id"]) != "" {
			continue
		}
		typ := stringOf(m["type"])
		if typ == "" && m["role"] != nil {
			typ, m["type"] = "message", json.RawMessage(`"message"`)
		}
		if typ != "message" && typ != "function_call" && typ != "function_call_output" {
			continue
		}
		m["id"] = mustJSON(newID(ItemPrefix(typ)))
		out[i] = mustJSON(m)
	}
	return out
}

// ItemResource renders a stored input item as the specification's
// ItemResource: with an id (fallback makes one for an item stored without),
// a message's content as a list of parts, and a status. It returns the
// item and its id.
func ItemResource(raw json.RawMessage, fallback func(prefix string) string) (json.RawMessage, string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw, ""
	}
	typ := stringOf(m["type"])
	if typ == "" && m["role"] != nil {
		typ, m["type"] = "message", json.RawMessage(`"message"`)
	}
	switch typ {
	case "message":
		m["content"] = contentParts(stringOf(m["role"]), m["content"])
		setAbsent(m, "status", `"completed"`)
	case "function_call", "function_call_output":
		setAbsent(m, "status", `"completed"`)
	case "reasoning":
		setAbsent(m, "summary", `[]`)
	}
	id := stringOf(m["id"])
	if id == "" {
		id = fallback(ItemPrefix(typ))
		m["id"] = mustJSON(id)
	}
	return mustJSON(m), id
}

// contentParts is a message's content as parts: a string becomes one text
// part, input_text for the user, system and developer, output_text for the
// assistant, whose text parts get the annotations and logprobs an output
// message has.
func contentParts(role string, content json.RawMessage) json.RawMessage {
	assistant := role == "assistant"
	var s string
	if json.Unmarshal(content, &s) == nil {
		if assistant {
			return mustJSON([]map[string]any{{"type": "output_text", "text": s, "annotations": []any{}, "logprobs": []any{}}})
		}
		return mustJSON([]map[string]any{{"type": "input_text", "text": s}})
	}
	var parts []map[string]json.RawMessage
	if !assistant || json.Unmarshal(content, &parts) != nil {
		return content
	}
	for _, p := range parts {
		switch stringOf(p["type"]) {
		case "input_text":
			p["type"] = json.RawMessage(`"output_text"`)
			fallthrough
		case "output_text":
			setAbsent(p, "annotations", `[]`)
			setAbsent(p, "logprobs", `[]`)
		}
	}
	return mustJSON(parts)
}

// stringOf is a JSON string's value, "" for anything else.
func stringOf(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s) //nolint:errcheck // not a string is ""
	return s
}

// outputID is the id of an output item the bridge makes: prefix (rs_,
// msg_, fc_, ctc_) and the random part of the response's id, then _n for
// the n-th of its kind where there are several (n < 0: none). resp_<hex>
// gives rs_<hex>, msg_<hex>, fc_<hex>_<n>; ResponseOfItem reads it back.
func outputID(prefix, responseID string, n int) string {
	id := prefix + strings.TrimPrefix(responseID, "resp_")
	if n >= 0 {
		id += "_" + strconv.Itoa(n)
	}
	return id
}

// callItemID is the id of the n-th call output item: a custom tool's call
// is a custom_tool_call (ctc_), any other a function_call (fc_).
func callItemID(t clientTool, responseID string, n int) string {
	if t.kind == customTool {
		return outputID("ctc_", responseID, n)
	}
	return outputID("fc_", responseID, n)
}

// ResponseOfItem is the id of the response whose output holds the item
// itemID, when the bridge made the item (outputID); "" for any other id.
func ResponseOfItem(itemID string) string {
	prefix, rest, ok := strings.Cut(itemID, "_")
	if !ok || prefix != "rs" && prefix != "msg" && prefix != "fc" && prefix != "ctc" {
		return ""
	}
	base, _, _ := strings.Cut(rest, "_")
	if base == "" || strings.Trim(base, "0123456789abcdef") != "" {
		return ""
	}
	return "resp_" + base
}

// Dereference replaces the input's item_references to items neither it
// nor history (the conversation previous_response_id continues) holds
// with the items find returns. find is called once, with the distinct ids
// of those references (at most MaxItemReferences, as ParseRequest
// checked), and not at all when there are none; it returns the items it
// found by id. A reference it did not find stays as it is, for the
// translator to resolve or refuse; an error of find's is returned. A
// client that stores responses sends what it got back as references to
// their items (the AI SDK does), with or without previous_response_id.
func (r *Request) Dereference(history []json.RawMessage, find func(ids []string) (map[string]json.RawMessage, error)) error {
	raw := r.Members["input"]
	var items []json.RawMessage
	if !bytes.Contains(raw, []byte("item_reference")) || json.Unmarshal(raw, &items) != nil {
		return nil
	}
	held := map[string]bool{}
	for _, it := range slices.Concat(history, items) {
		var has struct{ Type, ID string }
		if json.Unmarshal(it, &has) == nil && has.ID != "" && has.Type != "item_reference" {
			held[has.ID] = true
		}
	}
	refs := map[int]string{} // the id each reference to look up names, by its index
	var ids []string         // those ids, each once
	asked := map[string]bool{}
	for i, it := range items {
		var ref struct{ Type, ID string }
		if json.Unmarshal(it, &ref) != nil || ref.Type != "item_reference" || held[ref.ID] {
			continue
		}
		if !asked[ref.ID] {
			asked[ref.ID], ids = true, append(ids, ref.ID)
		}
		refs[i] = ref.ID
	}
	if len(ids) == 0 {
		return nil
	}
	found, err := find(ids)
	if err != nil {
		return err
	}
	changed, size := false, len(raw)
	for i, id := range refs {
		if it, ok := found[id]; ok {
			items[i], changed, size = it, true, size+len(it)
		}
		if size > MaxResolvedInput {
			return errResolvedTooLarge()
		}
	}
	if changed {
		r.Members["input"] = mustJSON(items)
	}
	return nil
}
