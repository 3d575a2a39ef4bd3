package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"modelgate/translate/api"
)

// A Responses request offers tools of kinds a chat model has no word for.
// The bridge offers each client tool to the chat model as a function and
// maps the model's calls back to the items the client expects:
//
//   - function: as it is.
//   - custom (freeform input, such as Codex's apply_patch): a function of
//     one string argument, "input", whose description carries the tool's
//     grammar when it has one; its calls come back as custom_tool_call
//     items with that input.
//   - namespace: its function and custom tools, each named
//     namespace__name for the model; their calls come back with the
//     namespace and the tool's own name.
//   - the tools OpenAI runs itself (web_search, file_search,
//     code_interpreter, image_generation, mcp, tool_search, computer use,
//     shell, apply_patch, ...): no chat provider runs them for the client,
//     so they are left out, and the response names them in its warning
//     header (translate.WarningHeader). A client that merely offers them
//     is not refused.

// toolKind is what the client expects a call of the tool to be.
type toolKind uint8

const (
	functionTool toolKind = iota
	customTool
)

// clientTool is a client tool as the chat model calls it.
type clientTool struct {
	kind      toolKind
	name      string // the client's
	namespace string
}

// toolset is a request's tools, by the function name the chat model
// knows each by.
type toolset struct {
	chat   []json.RawMessage // the chat request's tools
	byName map[string]clientTool
	left   []string // the types of the tools left out, in request order
	// webSearch is the chat request's web_search_options for a web_search
	// tool, when the model may search with its provider's search.
	webSearch *api.WebSearchOptions
}

// toolParam is a Responses tool, as far as the bridge reads it.
type toolParam struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Format      *struct {
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"`
	Tools []json.RawMessage `json:"tools"`
	// ExternalWebAccess and UserLocation are a web_search tool's: false
	// asks for cached results only, which no other provider offers.
	ExternalWebAccess *bool `json:"external_web_access"`
	UserLocation      *struct {
		api.Location
	} `json:"user_location"`
}

// parseTools reads the request's tools.
func parseTools(raw json.RawMessage) (toolset, error) {
	ts := toolset{byName: map[string]clientTool{}}
	if isNull(raw) {
		return ts, nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return ts, &api.RequestError{Param: "tools", Code: "invalid_type", Message: "Invalid type for 'tools': expected an array."}
	}
	for i, t := range tools {
		if err := ts.add(fmt.Sprintf("tools[%d]", i), t, ""); err != nil {
			return ts, err
		}
	}
	return ts, nil
}

// addItemTools adds the tools of the conversation's additional_tools
// items (Codex's, for the tools it loads as a conversation goes) to the
// request's: a chat model is offered every tool of the conversation at
// once. The first stored items are the history's.
func (r *Request) addItemTools(items []json.RawMessage, stored int) error {
	if r.noItemTools {
		return nil
	}
	for i, raw := range items {
		if !bytes.Contains(raw, []byte(additionalTools)) { // the common case, without decoding
			continue
		}
		var it struct {
			Type  string            `json:"type"`
			Tools []json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(raw, &it) != nil || it.Type != additionalTools {
			continue
		}
		param := fmt.Sprintf("input[%d]", i-stored)
		if i < stored {
			param = "previous_response_id"
		}
		for j, t := range it.Tools {
			if err := r.tools.add(fmt.Sprintf("%s.tools[%d]", param, j), t, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// add adds the tool at param, inside namespace ns when ns is set.
func (ts *toolset) add(param string, raw json.RawMessage, ns string) error {
	var t toolParam
	if json.Unmarshal(raw, &t) != nil {
		return api.Invalid(param, "Invalid tool.")
	}
	switch t.Type {
	case "function", "custom":
		if t.Name == "" {
			return &api.RequestError{Param: param + ".name", Code: "missing_required_parameter",
				Message: fmt.Sprintf("Missing required parameter: '%s.name'.", param)}
		}
		ts.function(t, ns)
	case "namespace":
		if ns != "" || t.Name == "" {
			return api.Invalid(param, "Invalid namespace tool: it needs a name and may not be inside another namespace.")
		}
		for j, inner := range t.Tools {
			if err := ts.add(fmt.Sprintf("%s.tools[%d]", param, j), inner, t.Name); err != nil {
				return err
			}
		}
	case "":
		return &api.RequestError{Param: param + ".type", Code: "missing_required_parameter",
			Message: fmt.Sprintf("Missing required parameter: '%s.type'.", param)}
	case "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11":
		ts.left = append(ts.left, t.Type)
		if ns == "" && (t.ExternalWebAccess == nil || *t.ExternalWebAccess) {
			ts.webSearch = &api.WebSearchOptions{}
			if t.UserLocation != nil && t.UserLocation.Location != (api.Location{}) {
				ts.webSearch.UserLocation = &struct {
					Approximate api.Location `json:"approximate"`
				}{t.UserLocation.Location}
			}
		}
	default:
		ts.left = append(ts.left, t.Type)
	}
	return nil
}

// function offers t to the chat model as a function.
func (ts *toolset) function(t toolParam, ns string) {
	name := qualified(ns, t.Name)
	if _, dup := ts.byName[name]; dup {
		return // the first of two tools the model would call by one name
	}
	fn := map[string]any{"name": name}
	if t.Description != nil {
		fn["description"] = *t.Description
	}
	if t.Type == "function" {
		fn["parameters"] = t.Parameters
		if t.Strict != nil {
			fn["strict"] = *t.Strict
		}
		ts.byName[name] = clientTool{kind: functionTool, name: t.Name, namespace: ns}
	} else {
		input := map[string]any{"type": "string", "description": "The tool's input, as free text."}
		if f := t.Format; f != nil && f.Type == "grammar" && f.Definition != "" {
			input["description"] = fmt.Sprintf("The tool's input, which must follow this %s grammar:\n%s", f.Syntax, f.Definition)
		}
		fn["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"input": input},
			"required": []string{"input"}, "additionalProperties": false}
		ts.byName[name] = clientTool{kind: customTool, name: t.Name, namespace: ns}
	}
	b, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
	ts.chat = append(ts.chat, b)
}

// qualified is the name the chat model calls tool name of namespace ns
// by: namespace__name (a namespace's trailing underscores, as in Codex's
// mcp__server__, are not doubled).
func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return strings.TrimRight(ns, "_") + "__" + name
}

// call is the client tool the chat model called by name; a name the
// request did not offer (history from another request) is a function.
func (ts toolset) call(name string) clientTool {
	if t, ok := ts.byName[name]; ok {
		return t
	}
	return clientTool{kind: functionTool, name: name}
}

// warning is the response's warning, empty when every tool was offered.
func (ts toolset) warning(webSearch bool) string {
	left := ts.left
	if webSearch && ts.webSearch != nil {
		left = slices.DeleteFunc(slices.Clone(left), func(typ string) bool { return strings.HasPrefix(typ, "web_search") })
	}
	if len(left) == 0 {
		return ""
	}
	return "tools not available through this model and left out: " + strings.Join(left, ", ")
}

// customInput is the input of a custom tool call, from the arguments the
// chat model called its function with; arguments that are not the
// function's object are the input as they are.
func customInput(arguments string) string {
	var args struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(arguments), &args) != nil || args.Input == nil {
		return arguments
	}
	return *args.Input
}
