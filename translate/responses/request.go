package responses

import (
	"bytes"
	"encoding/json"
	"fmt"

	"modelgate/translate/api"
)

// Request is a validated CreateResponse request.
type Request struct {
	Model              string
	Stream             bool
	Store              bool
	PreviousResponseID string
	// Members are the request's top-level members as sent.
	Members map[string]json.RawMessage
	// tools are its tools as a chat model is offered them.
	tools toolset
	// noItemTools: the request goes without the tools of its
	// conversation's additional_tools items (Without tools).
	noItemTools bool
}

// ParseRequest validates a CreateResponse body. Input may be missing only
// when previous_response_id continues a stored conversation.
func ParseRequest(body []byte) (*Request, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, &api.RequestError{Message: "We could not parse the JSON body of your request. The API expects a JSON object."}
	}
	r := &Request{Members: m, Store: true}
	checks := []func() error{
		func() error { return stringMember(m, "model", &r.Model, true) },
		func() error { return stringMember(m, "previous_response_id", &r.PreviousResponseID, false) },
		func() error { return boolMember(m, "stream", &r.Stream) },
		func() error { return boolMember(m, "store", &r.Store) },
		func() error { return checkInput(m, r.PreviousResponseID != "") },
		func() error { return numberIn(m, "temperature", 0, 2) },
		func() error { return numberIn(m, "top_p", 0, 1) },
		func() error { return numberIn(m, "max_output_tokens", 16, 1<<31) },
		func() error { return checkTruncation(m) },
		func() (err error) { r.tools, err = parseTools(m["tools"]); return err },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func stringMember(m map[string]json.RawMessage, name string, dst *string, required bool) error {
	raw := m[name]
	if isNull(raw) {
		if required {
			return &api.RequestError{Param: name, Code: "missing_required_parameter", Message: fmt.Sprintf("Missing required parameter: '%s'.", name)}
		}
		return nil
	}
	if json.Unmarshal(raw, dst) != nil || required && *dst == "" {
		return &api.RequestError{Param: name, Code: "invalid_type", Message: fmt.Sprintf("Invalid type for '%s': expected a string.", name)}
	}
	return nil
}

func boolMember(m map[string]json.RawMessage, name string, dst *bool) error {
	if raw := m[name]; !isNull(raw) && json.Unmarshal(raw, dst) != nil {
		return &api.RequestError{Param: name, Code: "invalid_type", Message: fmt.Sprintf("Invalid type for '%s': expected a boolean.", name)}
	}
	return nil
}

func checkInput(m map[string]json.RawMessage, continuing bool) error {
	raw := m["input"]
	if isNull(raw) {
		if continuing {
			return nil
		}
		return &api.RequestError{Param: "input", Code: "missing_required_parameter", Message: "Missing required parameter: 'input'."}
	}
	var s string
	var items []json.RawMessage
	if json.Unmarshal(raw, &s) != nil && json.Unmarshal(raw, &items) != nil {
		return &api.RequestError{Param: "input", Code: "invalid_type", Message: "Invalid type for 'input': expected a string or an array of input items."}
	}
	if n := len(referenced(items)); n > MaxItemReferences {
		return api.Invalid("input", "Invalid 'input': a request may name at most %d distinct items by item_reference, but this one names %d.", MaxItemReferences, n)
	}
	return nil
}

// MaxResolvedInput bounds the input of a request with its item_references
// resolved, in bytes: a reference is a copy of the item it names, and
// 40 bytes naming a 100 KB item again and again would otherwise make one
// request of a few megabytes gigabytes in the gateway's memory. 64 MiB is
// far above a million-token context window's text.
const MaxResolvedInput = 64 << 20

// errResolvedTooLarge is the answer to a request whose references resolve
// to more than MaxResolvedInput.
func errResolvedTooLarge() error {
	return api.Invalid("input", "Invalid 'input': the items it names by item_reference add up to more than %d MiB.", MaxResolvedInput>>20)
}

// MaxItemReferences is how many distinct items one request may name by
// item_reference. The gateway looks those it does not hold in the request
// up in the store, before the request is admitted (its estimate counts
// them): the limit bounds that work. It is far above what clients send:
// Codex and the OpenAI SDKs send whole items or continue with
// previous_response_id, naming few or none; the AI SDK names every output
// item of the conversation so far, and 10,000 of them (a function call or
// a reasoning item is seldom under a hundred tokens with what goes with
// it) fill a million-token context window.
const MaxItemReferences = 10000

// referenced is the set of ids items name by item_reference.
func referenced(items []json.RawMessage) map[string]bool {
	ids := map[string]bool{}
	for _, it := range items {
		var ref struct{ Type, ID string }
		if bytes.Contains(it, []byte("item_reference")) && json.Unmarshal(it, &ref) == nil && ref.Type == "item_reference" {
			ids[ref.ID] = true
		}
	}
	return ids
}

func numberIn(m map[string]json.RawMessage, name string, lo, hi float64) error {
	raw := m[name]
	if isNull(raw) {
		return nil
	}
	var v float64
	if json.Unmarshal(raw, &v) != nil {
		return &api.RequestError{Param: name, Code: "invalid_type", Message: fmt.Sprintf("Invalid type for '%s': expected a number.", name)}
	}
	if v < lo || v > hi {
		return api.Invalid(name, "Invalid '%s': expected a value between %g and %g, but got %s instead.", name, lo, hi, raw)
	}
	return nil
}

func checkTruncation(m map[string]json.RawMessage) error {
	var t string
	if raw := m["truncation"]; !isNull(raw) && (json.Unmarshal(raw, &t) != nil || t != "auto" && t != "disabled") {
		return api.Invalid("truncation", "Invalid 'truncation': expected 'auto' or 'disabled'.")
	}
	return nil
}
