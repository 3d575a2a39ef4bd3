package api

import (
	"encoding/json"
	"slices"
	"strings"

	"modelgate/translate/jsonscan"
)

// A provider bills the operator's account for whatever a request makes
// it do, and reaches wherever the request points it. So a request may
// make the provider do beyond answering only what the operator enabled for
// the model; everything else is left out of the request, as the gateway
// leaves out what a provider cannot do, and named in the answer's warning
// header (translate.WarningHeader) rather than refused: an agent that
// offers a tool in every request keeps working on every model.
//
// What the operator can enable today is the provider's own web search
// (the model's web_search). Never enabled: the other tools the provider
// runs itself (web fetch, code execution and its containers, the advisor,
// the MCP connector and its servers, OpenAI's file search, code
// interpreter, image generation and remote MCP), and what costs more than
// the provider's standard price (priority and scale tiers, fast mode,
// inference pinned to a geography, Anthropic's 1M-token context beta).
// What runs on the client's side (functions, Anthropic's bash, text
// editor, computer use and memory tools, Codex's shell and patch tools),
// and tool search, which searches the request's own tools, stay.

// LeftOut names what a request lost to the model's configuration, in the
// order found.
type LeftOut []string

// Warning is the warning header's text for what was left out; empty for
// nothing.
func (l LeftOut) Warning() string {
	if len(l) == 0 {
		return ""
	}
	return "not enabled for this model, left out: " + strings.Join(l, ", ")
}

// JoinWarnings joins two warnings of one answer, either of which may be
// empty.
func JoinWarnings(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// cheaperTiers are the service tiers that cost no more than a provider's
// default: OpenAI's auto, default and flex, and Anthropic's standard_only
// (Anthropic's default, auto, may use the operator's Priority Tier).
var cheaperTiers = []string{`"auto"`, `"default"`, `"flex"`, `"standard_only"`}

// PremiumMember reports a request member that asks for what costs more
// than the standard price, in any dialect: a service tier but a cheaper
// one, fast mode, inference pinned to one geography.
func PremiumMember(name string, v json.RawMessage) bool {
	if jsonscan.IsNull(v) {
		return false
	}
	v = jsonscan.TrimSpace(v)
	switch name {
	case "service_tier":
		return !slices.Contains(cheaperTiers, string(v))
	case "speed":
		return string(v) != `"standard"`
	case "inference_geo":
		return string(v) != `"global"`
	}
	return false
}

// leaveOut lists the members of m that go: named for the warning,
// followed by their value when it is a short string (a service tier).
func leaveOut(m map[string]json.RawMessage, names []string, left LeftOut) (map[string]bool, LeftOut) {
	drop := map[string]bool{}
	for _, name := range names {
		v, ok := m[name]
		if !ok {
			continue
		}
		drop[name] = true
		left = append(left, LeftMember(name, v))
	}
	return drop, left
}

// LeftMember names a member left out for the warning: its name, followed
// by its value when that is a short string (a service tier).
func LeftMember(name string, v json.RawMessage) string {
	if s := jsonscan.TrimSpace(v); len(s) < 40 && jsonscan.Kind(s) == '"' {
		return name + " " + string(s)
	}
	return name
}

// editMembers is obj, a JSON object, with the members replace names
// holding its values instead (nil leaves them out), every other member
// and the order kept, their keys and values byte for byte. Every occurrence of a repeated name
// is edited, and names are matched as a JSON decoder reads them
// ("mcp\u005fservers" is mcp_servers).
func editMembers(obj []byte, replace map[string]json.RawMessage) ([]byte, error) {
	members, err := objectMembers(obj, nil)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	for _, mb := range members {
		v := mb.Value
		if nv, ok := replace[memberName(mb)]; ok {
			if nv == nil {
				continue
			}
			v = nv
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, mb.Key...) // as sent, escapes and all
		out = append(out, '"', ':')
		out = append(out, v...)
	}
	return append(out, '}'), nil
}

// Permitted is the chat request as the model's configuration allows it,
// and what it lost: web_search_options unless the model may search the
// web (webSearch), a service tier that costs more than the default. The
// request itself when it loses nothing.
func (r *ChatRequest) Permitted(webSearch bool) (*ChatRequest, LeftOut, error) {
	var names []string
	if !webSearch && !jsonscan.IsNull(r.Members["web_search_options"]) {
		names = append(names, "web_search_options")
	}
	if PremiumMember("service_tier", r.Members["service_tier"]) {
		names = append(names, "service_tier")
	}
	if len(names) == 0 {
		return r, nil, nil
	}
	drop, left := leaveOut(r.Members, names, nil)
	body, err := editMembers(r.body(), nilValues(drop))
	if err != nil {
		return nil, nil, err
	}
	out, err := ParseChatRequest(body)
	return out, left, err
}

// body is the request as sent, or its members encoded anew when a
// repeated key left Body unset.
func (r *ChatRequest) body() []byte {
	if r.Body != nil {
		return r.Body
	}
	b, _ := json.Marshal(r.Members) //nolint:errchkjson // raw members encode
	return b
}

func nilValues(names map[string]bool) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(names))
	for n := range names {
		out[n] = nil
	}
	return out
}

// clientRunTools are the Anthropic-defined tools the client runs itself,
// by their type's prefix, and tool search, which searches the request's
// own tools: whatever else has a type is run by the provider (a server
// tool), and only web search may be enabled.
var clientRunTools = []string{"custom", "bash_", "text_editor_", "computer_", "memory_", "tool_search_tool_"}

// Permitted is the Messages request as the model's configuration allows
// it, and what it lost: of the tools, those the provider runs itself but
// web search when the model may search (webSearch); the MCP connector's
// servers and code execution's container; a premium service tier, fast
// mode or inference geography; and the betas of what is not enabled
// (deniedBeta). The request itself when it loses nothing.
func (r *MessagesRequest) Permitted(webSearch bool) (*MessagesRequest, LeftOut, error) {
	tools, left, err := messagesTools(r.Members["tools"], webSearch)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, name := range []string{"mcp_servers", "container", "service_tier", "speed", "inference_geo"} {
		if v, ok := r.Members[name]; ok && (name == "mcp_servers" || name == "container" || PremiumMember(name, v)) {
			names = append(names, name)
		}
	}
	drop, left := leaveOut(r.Members, names, left)
	beta, betas := permittedBetas(r.Beta)
	left = append(left, betas...)
	if len(left) == 0 {
		return r, nil, nil
	}
	replace := nilValues(drop)
	if tools != nil {
		replace["tools"] = tools
		if choice := r.Members["tool_choice"]; forcesMissingTool(choice, tools) {
			replace["tool_choice"] = nil
		}
	}
	body, err := editMembers(r.Body, replace)
	if err != nil {
		return nil, nil, err
	}
	out, err := ParseMessagesRequest(body, r.MaxTokens == 0)
	if err != nil {
		return nil, nil, err
	}
	out.Version, out.Beta = r.Version, beta
	return out, left, nil
}

// messagesTools is the tools array without the tools the provider runs
// itself (but web search when webSearch), nil when it keeps them all, and
// their types.
func messagesTools(raw json.RawMessage, webSearch bool) (json.RawMessage, LeftOut, error) {
	return WithoutTools(raw, func(typ string) bool { return serverRun(typ, webSearch) })
}

// WithoutTools is a request's tools array without the tools whose type
// drop reports, nil when it keeps them all, and what it left out ("tool"
// and the type), for the dialects' Permitted. A tools member that is no
// array is a 400 on tools; an entry that is no object has no type.
func WithoutTools(raw json.RawMessage, drop func(typ string) bool) (json.RawMessage, LeftOut, error) {
	if jsonscan.IsNull(raw) {
		return nil, nil, nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return nil, nil, wrongType("tools", "an array", raw)
	}
	var left LeftOut
	kept := tools[:0:0]
	for _, t := range tools {
		var tool struct {
			Type string `json:"type"`
		}
		json.Unmarshal(t, &tool) //nolint:errcheck // a tool that is no object has no type: the provider's to refuse
		if drop(tool.Type) {
			left = append(left, "tool "+tool.Type)
			continue
		}
		kept = append(kept, t)
	}
	if len(left) == 0 {
		return nil, nil, nil
	}
	out, err := json.Marshal(kept)
	return out, left, err
}

// serverRun reports a Messages tool type the provider runs itself that
// the model's configuration does not enable.
func serverRun(typ string, webSearch bool) bool {
	if typ == "" || webSearch && strings.HasPrefix(typ, "web_search_") {
		return false
	}
	for _, p := range clientRunTools {
		if strings.HasPrefix(typ, p) {
			return false
		}
	}
	return true
}

// forcesMissingTool reports a tool_choice that names a tool tools no
// longer has: the provider would refuse it.
func forcesMissingTool(choice, tools json.RawMessage) bool {
	var c struct {
		Type, Name string
	}
	if json.Unmarshal(choice, &c) != nil || c.Type != "tool" {
		return false
	}
	var kept []struct{ Name string }
	json.Unmarshal(tools, &kept) //nolint:errcheck // tools were decoded once already
	return !slices.ContainsFunc(kept, func(t struct{ Name string }) bool { return t.Name == c.Name })
}

// deniedBetas are the prefixes of Anthropic betas that enable what the
// operator has not: the 1M-token context (a premium price past 200,000
// prompt tokens), fast mode (a premium price), the MCP connector, code
// execution, web fetch, the Files API (files of the operator's
// organization, every tenant's) and skills (which run in code
// execution's container). Other betas are the client's to use.
var deniedBetas = []string{"context-1m-", "fast-mode-", "mcp-client-", "code-execution-", "web-fetch-", "files-api-", "skills-"}

// permittedBetas is an anthropic-beta header without the denied betas,
// and those.
func permittedBetas(header string) (string, LeftOut) {
	if header == "" {
		return "", nil
	}
	var kept []string
	var left LeftOut
	for b := range strings.SplitSeq(header, ",") {
		b = strings.TrimSpace(b)
		switch {
		case b == "":
		case slices.ContainsFunc(deniedBetas, func(p string) bool { return strings.HasPrefix(b, p) }):
			left = append(left, "beta "+b)
		default:
			kept = append(kept, b)
		}
	}
	if len(left) == 0 {
		return header, nil
	}
	return strings.Join(kept, ","), left
}
