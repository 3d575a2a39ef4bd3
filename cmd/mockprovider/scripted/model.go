// Package scripted is a mock provider that behaves like a model rather
// than replaying one: given a conversation it decides what a model would,
// by fixed rules, in each provider's wire format. Real agent clients
// (Codex, the Agents SDK, the AI SDK) run their loops against it through
// the gateway.
//
// The rules, applied to the conversation since the last user message:
//
//   - no tool result yet and tools offered: call one tool, the first of
//     exec_command, shell and bash (in any case) that is offered, else
//     Codex's code mode (exec: a script that runs the command with
//     tools.exec_command), else the first offered; string arguments are
//     filled with the first `backticked` text of the user's message (a
//     command, a name), a command array with ["bash", "-lc", that text];
//   - a tool result and a tool call required (tool_choice any or
//     required): call the last offered tool, which is where a gateway puts
//     the tool that carries a JSON answer, with arguments made from its
//     schema;
//   - a JSON schema asked for: answer JSON made from the schema, strings
//     quoting the tool result (or the prompt);
//   - otherwise: answer text quoting the tool result ("The tool said: …")
//     or, with no tool, the prompt ("You said: …").
//
// With reasoning on, a turn starts with a thinking block signed by the
// model (an HMAC of its text). Like the real providers, the model checks
// what comes back: a thinking block whose signature does not verify is
// refused, and where the provider requires it (Anthropic and Claude on
// Bedrock with thinking on, Gemini's thought signatures on function
// calls) a tool call turn sent back without its signed thinking is
// refused with the provider's error. Claude (on Anthropic and Bedrock)
// caches prompts at the client's cache markers as Anthropic documents it,
// and reports cache reads and writes (cache.go). Offered Anthropic's web
// search server tool, Claude searches the web once for the prompt before
// it answers, until tool results come back, and reports the search in its
// usage (server_tool_use.web_search_requests) as Anthropic does.
package scripted

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Conversation is a request as the model reads it, whatever its format.
type Conversation struct {
	// Prompt is the text of the last user message.
	Prompt string
	// Results are the tool results given after the last user message.
	Results []string
	// Tools are the offered tools, in order.
	Tools []Tool
	// MustCall reports that the request requires a tool call.
	MustCall bool
	// Schema is the JSON schema asked of the answer; nil for none.
	Schema json.RawMessage
	// Reasoning reports that thinking is on.
	Reasoning bool
	// WebSearch reports that the provider's own web search is offered (a
	// server tool, not one of Tools).
	WebSearch bool
	// InputChars counts the request's characters, for usage.
	InputChars int
}

// Tool is an offered tool.
type Tool struct {
	Name string
	// Parameters is its JSON schema; nil for a freeform tool.
	Parameters json.RawMessage
}

// Turn is what the model answers.
type Turn struct {
	// Thinking is the thought, with its Signature; empty with reasoning
	// off.
	Thinking, Signature string
	// Call is the tool call; nil for a text (or JSON) answer.
	Call *Call
	// Text is the answer when Call is nil.
	Text string
	// InputTokens and OutputTokens are the turn's usage; InputTokens
	// leaves out the prompt's cache reads and writes (CacheRead,
	// CacheWrite).
	InputTokens, OutputTokens, CacheRead, CacheWrite int
	// CacheWrite1h of the writes are for an hour.
	CacheWrite1h int
	// Search is the query of the web search the model ran before its
	// answer; empty for none.
	Search string
}

// cached sets the turn's cache reads and writes, which its input tokens
// leave out.
func (t *Turn) cached(c cacheCounts) {
	t.CacheRead, t.CacheWrite, t.CacheWrite1h = c.Read, c.Write, c.Write1h
	t.InputTokens = max(1, t.InputTokens-c.Read-c.Write)
}

// Call is a tool call.
type Call struct {
	Name string
	// Arguments is its JSON arguments, or the raw input of a freeform
	// tool.
	Arguments string
}

// key signs the model's thinking. It is a mock's key, not a secret.
var key = []byte("modelgate scripted model")

// Sign is the signature of a thought.
func Sign(thinking string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(thinking))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is the model's for thinking.
func Verify(thinking, signature string) bool {
	want := Sign(thinking)
	return hmac.Equal([]byte(want), []byte(signature))
}

// Answer is the model's turn for c.
func Answer(c Conversation) Turn {
	t := Turn{InputTokens: max(1, c.InputChars/4)}
	quote := c.Prompt
	if len(c.Results) > 0 {
		quote = strings.Join(c.Results, "\n")
	}
	switch {
	case len(c.Results) == 0 && len(c.Tools) > 0:
		tool, command := pickTool(c.Tools), backticked(c.Prompt)
		if codeMode(tool) {
			command = script(command)
		}
		t.Call = &Call{Name: tool.Name, Arguments: arguments(tool, command)}
	case c.MustCall && len(c.Tools) > 0:
		tool := c.Tools[len(c.Tools)-1]
		t.Call = &Call{Name: tool.Name, Arguments: arguments(tool, quote)}
	case c.Schema != nil:
		b, _ := json.Marshal(fromSchema(c.Schema, quote, 0))
		t.Text = string(b)
	case len(c.Results) > 0:
		t.Text = "The tool said: " + quote
	default:
		t.Text = "You said: " + quote
	}
	if c.Reasoning {
		t.Thinking = "The user asked: " + firstLine(c.Prompt) + ". "
		if t.Call != nil {
			t.Thinking += "I will call " + t.Call.Name + "."
		} else {
			t.Thinking += "I have what I need to answer."
		}
		t.Signature = Sign(t.Thinking)
	}
	if c.WebSearch && len(c.Results) == 0 {
		t.Search = firstLine(c.Prompt)
	}
	out := len(t.Thinking) + len(t.Text)
	if t.Call != nil {
		out += len(t.Call.Name) + len(t.Call.Arguments)
	}
	t.OutputTokens = max(1, out/4)
	return t
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// pickTool prefers a shell tool, as a coding model asked to run a command
// would (Claude Code's is Bash), then Codex's code mode, whose script
// runs its shell tool.
func pickTool(tools []Tool) Tool {
	for _, name := range []string{"exec_command", "shell", "bash"} {
		for _, t := range tools {
			if strings.EqualFold(t.Name, name) {
				return t
			}
		}
	}
	for _, t := range tools {
		if codeMode(t) {
			return t
		}
	}
	return tools[0]
}

// codeMode reports Codex's code mode tool: exec, which runs JavaScript
// that calls the other tools (tools.exec_command), offered by Codex as a
// freeform tool, in a bridged request as functions__exec.
func codeMode(t Tool) bool { return t.Name == "exec" || strings.HasSuffix(t.Name, "__exec") }

// script is the code mode script that runs command with Codex's shell
// tool and answers its output.
func script(command string) string {
	quoted, _ := json.Marshal(command)
	return "const r = await tools.exec_command({cmd: " + string(quoted) + "});\ntext(r.output);"
}

// backticked is the first `quoted` text of s, or s's first line.
func backticked(s string) string {
	if _, rest, ok := strings.Cut(s, "`"); ok {
		if q, _, ok := strings.Cut(rest, "`"); ok && q != "" {
			return q
		}
	}
	return firstLine(s)
}

// arguments are a call's arguments for tool: a freeform tool gets text
// itself, a function an object made from its schema.
func arguments(tool Tool, text string) string {
	if tool.Parameters == nil {
		return text
	}
	b, _ := json.Marshal(fromSchema(tool.Parameters, text, 0))
	return string(b)
}

// schema is the part of a JSON schema the model reads.
type schema struct {
	Type       any                        `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	Items      json.RawMessage            `json:"items"`
	Enum       []any                      `json:"enum"`
	Const      any                        `json:"const"`
	AnyOf      []json.RawMessage          `json:"anyOf"`
	Ref        string                     `json:"$ref"`
}

// fromSchema makes a value that s accepts: strings are text (a property
// named like a command gets ["bash", "-lc", text] when it is an array),
// numbers 1, booleans true, objects their properties (the required ones,
// or all when none are). $refs are not followed: their value is text.
func fromSchema(raw json.RawMessage, text string, depth int) any {
	var s schema
	if json.Unmarshal(raw, &s) != nil || depth > 8 {
		return text
	}
	if s.Const != nil {
		return s.Const
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	if len(s.AnyOf) > 0 {
		return fromSchema(s.AnyOf[0], text, depth+1)
	}
	typ, _ := s.Type.(string)
	if types, ok := s.Type.([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	if typ == "" && s.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		names := s.Required
		if len(names) == 0 {
			for name := range s.Properties {
				names = append(names, name)
			}
			sort.Strings(names)
		}
		obj := make(map[string]any, len(names))
		for _, name := range names {
			p, ok := s.Properties[name]
			if !ok {
				obj[name] = text
				continue
			}
			if (name == "command" || name == "cmd") && isArray(p) {
				obj[name] = []string{"bash", "-lc", text}
				continue
			}
			obj[name] = fromSchema(p, text, depth+1)
		}
		return obj
	case "array":
		if s.Items == nil {
			return []any{text}
		}
		return []any{fromSchema(s.Items, text, depth+1)}
	case "integer", "number":
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	}
	return text
}

func isArray(raw json.RawMessage) bool {
	var s schema
	return json.Unmarshal(raw, &s) == nil && s.Type == "array"
}

// text is a content value's text: a string, or the text of an array of
// parts (each a string or an object with a "text" field), or a JSON value
// as it is.
func text(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			var part struct {
				Text    *string         `json:"text"`
				Content json.RawMessage `json:"content"`
			}
			switch {
			case json.Unmarshal(p, &s) == nil:
				b.WriteString(s)
			case json.Unmarshal(p, &part) == nil && part.Text != nil:
				b.WriteString(*part.Text)
			case json.Unmarshal(p, &part) == nil && part.Content != nil:
				b.WriteString(text(part.Content))
			}
		}
		return b.String()
	}
	return string(raw)
}

// refuse is an error the model answers with, a 400 in its provider's
// shape.
func refuse(format string, args ...any) error { return fmt.Errorf(format, args...) }
