package responses

import (
	"encoding/json"
	"slices"
	"strings"

	"modelgate/translate/api"
)

// clientRunTools are the Responses tools the client runs itself (the
// function kinds, Codex's shell and patch tools, computer use) and tool
// search over the request's own tools: what else has a type OpenAI runs
// itself, and only web search may be enabled (api.LeftOut says why).
var clientRunTools = []string{"function", "custom", "namespace", "local_shell", "shell", "apply_patch",
	"computer_use_preview", "computer", "tool_search"}

// Permitted is the request as the model's configuration allows it, and
// what it lost: of the tools, those OpenAI runs itself but web search
// when the model may search (webSearch), with a tool_choice that forces
// one of them; and a service tier that costs more than the default. The
// request itself when it loses nothing.
func (r *Request) Permitted(webSearch bool) (*Request, api.LeftOut, error) {
	tools, left, err := permittedTools(r.Members["tools"], webSearch)
	if err != nil {
		return nil, nil, err
	}
	premium := api.PremiumMember("service_tier", r.Members["service_tier"])
	if premium {
		left = append(left, api.LeftMember("service_tier", r.Members["service_tier"]))
	}
	if len(left) == 0 {
		return r, nil, nil
	}
	out := *r
	out.Members = make(map[string]json.RawMessage, len(r.Members))
	for k, v := range r.Members {
		out.Members[k] = v
	}
	if premium {
		delete(out.Members, "service_tier")
	}
	if tools != nil {
		out.Members["tools"] = tools
		if forcesServerTool(r.Members["tool_choice"], webSearch) {
			delete(out.Members, "tool_choice")
		}
		if out.tools, err = parseTools(tools); err != nil {
			return nil, nil, err
		}
	}
	return &out, left, nil
}

// permittedTools is the tools array without the tools OpenAI runs itself
// (but web search when webSearch), nil when it keeps them all, and their
// types.
func permittedTools(raw json.RawMessage, webSearch bool) (json.RawMessage, api.LeftOut, error) {
	return api.WithoutTools(raw, func(typ string) bool { return serverRun(typ, webSearch) })
}

// serverRun reports a tool type OpenAI runs itself that the model's
// configuration does not enable.
func serverRun(typ string, webSearch bool) bool {
	if webSearch && strings.HasPrefix(typ, "web_search") {
		return false
	}
	return !slices.Contains(clientRunTools, typ)
}

// forcesServerTool reports a tool_choice that forces a tool OpenAI runs
// itself ({"type": "file_search"}, {"type": "mcp", …}): with the tool
// left out, OpenAI would refuse it.
func forcesServerTool(choice json.RawMessage, webSearch bool) bool {
	var c struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(choice, &c) != nil {
		return false
	}
	return c.Type != "" && c.Type != "allowed_tools" && serverRun(c.Type, webSearch)
}
