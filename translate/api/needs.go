package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"

	"modelgate/translate/jsonscan"
)

// The gateway declares per model what it can take and do. Before it calls
// a provider it reads what a request uses of its model (Needs), refuses
// what the model lacks, or, where the operator says so for a capability,
// serves the request without it (Without) and names what went in the
// warning header, as Permitted does.
//
// Only tools, JSON schema output and reasoning can be left out: the answer
// is then plain text, or comes without thinking first, to the same
// question. Leaving out an image, a recording or a file would change the
// question itself without the client knowing, so those are always refused.
//
// Top-level members are read by their exact names, as Members holds them
// (and as Permitted reads them); inside them keys are read as encoding/json
// reads them into the translators' structs, without regard to case, so
// that what a translator would find is found.

// A Capability is what a request may need of its model.
type Capability string

// The capabilities, in the order Needs lists them.
const (
	CapImage      Capability = "image"
	CapAudio      Capability = "audio"
	CapFile       Capability = "file"
	CapTools      Capability = "tools"
	CapJSONSchema Capability = "json_schema"
	CapReasoning  Capability = "reasoning"
)

// capabilities are the capabilities in the order Needs lists them; a
// CapSet's bit i is capabilities[i].
var capabilities = [...]Capability{CapImage, CapAudio, CapFile, CapTools, CapJSONSchema, CapReasoning}

// Capabilities are the capabilities a request may use, in the order Needs
// lists them: the input kinds, then what can be dropped.
func Capabilities() []Capability { return capabilities[:] }

// Phrase names c in a sentence, such as a 400's message: "This model does
// not support image input."
func (c Capability) Phrase() string {
	switch c {
	case CapImage, CapAudio, CapFile:
		return string(c) + " input"
	case CapJSONSchema:
		return "JSON schema output"
	}
	return string(c)
}

// Droppable reports whether a request can be served without c: tools,
// JSON schema output and reasoning. The gateway's configuration can check
// it when an operator asks to serve without a capability.
func (c Capability) Droppable() bool {
	return c == CapTools || c == CapJSONSchema || c == CapReasoning
}

// Needs is what a request uses of its model.
type Needs struct {
	// Uses are the capabilities the request uses, in the order of the
	// constants, each once: an image, recording or file anywhere in its
	// input (any message, any turn, a tool's result); tools offered, of
	// any kind (even with a tool_choice of none, since the provider still
	// gets them); JSON schema output; reasoning asked for.
	Uses []Capability
	// Effort is the reasoning effort the request states ("low", "high",
	// …), "" where it states none. An effort of "none" asks for no
	// reasoning.
	Effort string
	// MaxOutput is the bound on the answer the client set, 0 for none.
	MaxOutput int64
}

// Has reports whether the request uses c.
func (n Needs) Has(c Capability) bool {
	for _, u := range n.Uses {
		if u == c {
			return true
		}
	}
	return false
}

// CapSet is a set of capabilities, as a dialect gathers what a request
// uses before it makes Needs. The zero value is empty.
type CapSet uint8

func capBit(c Capability) CapSet {
	for i, k := range capabilities {
		if k == c {
			return 1 << i
		}
	}
	return 0
}

// Add puts c in the set.
func (s *CapSet) Add(c Capability) { *s |= capBit(c) }

// Has reports whether c is in the set.
func (s CapSet) Has(c Capability) bool { return s&capBit(c) != 0 }

// Needs is the Needs of a request that uses the set, states effort and
// bounds its answer by maxOutput.
func (s CapSet) Needs(effort string, maxOutput int64) Needs {
	n := Needs{Effort: effort, MaxOutput: maxOutput}
	if s != 0 {
		n.Uses = make([]Capability, 0, bits.OnesCount8(uint8(s)))
	}
	for i, c := range capabilities {
		if s&(1<<i) != 0 {
			n.Uses = append(n.Uses, c)
		}
	}
	return n
}

// ToDrop is the set of capabilities drop names for a Without, or an error
// when it names one that cannot be left out (see Droppable): the caller's
// mistake, since refusing is the only answer to a request that uses it.
func ToDrop(drop []Capability) (CapSet, error) {
	var s CapSet
	for _, c := range drop {
		if !c.Droppable() {
			return 0, fmt.Errorf("leaving out %q: only tools, json_schema and reasoning can be left out of a request", c)
		}
		s.Add(c)
	}
	return s, nil
}

// Needs is what the chat request uses of its model: image_url,
// input_audio and file parts in any message; tools (or the legacy
// functions); a response_format of type json_schema; a reasoning_effort
// but "none" (or a reasoning object, as some compatible providers take,
// that does not turn it off); max_completion_tokens or max_tokens.
func (r *ChatRequest) Needs() Needs {
	m := r.Members
	uses := chatInputs(m["messages"])
	if NonEmpty(m["tools"]) || NonEmpty(m["functions"]) {
		uses.Add(CapTools)
	}
	if IsString(Field(m["response_format"], "type"), "json_schema") {
		uses.Add(CapJSONSchema)
	}
	if chatEffortAsks(m["reasoning_effort"]) || chatReasoningAsks(m["reasoning"]) {
		uses.Add(CapReasoning)
	}
	effort := EffortOf(m["reasoning_effort"])
	if e := EffortOf(Field(m["reasoning"], "effort")); effort == "" || effort == "none" && e != "" {
		effort = e
	}
	return uses.Needs(effort, PositiveInteger(m, "max_completion_tokens", "max_tokens"))
}

// chatInputs is the set of what the content parts of msgs, a chat
// request's messages, send of other kinds than text. Most requests have
// none, which a search of the bytes tells without walking them (an
// escape may spell a type otherwise: then they are walked).
func chatInputs(msgs []byte) CapSet {
	var uses CapSet
	if !Underscored(msgs, `url"`, `audio"`) && !mayHold(msgs, `"file"`) {
		return uses
	}
	eachElement(msgs, func(msg []byte) {
		eachElement(Field(msg, "content"), func(part []byte) {
			switch typ := Field(part, "type"); {
			case IsString(typ, "image_url"):
				uses.Add(CapImage)
			case IsString(typ, "input_audio"):
				uses.Add(CapAudio)
			case IsString(typ, "file"):
				uses.Add(CapFile)
			}
		})
	})
	return uses
}

// chatEffortAsks reports whether reasoning_effort asks for reasoning:
// set, but not to "none".
func chatEffortAsks(v []byte) bool {
	return !jsonscan.IsNull(v) && !IsString(v, "none")
}

// chatReasoningAsks reports whether a chat request's reasoning object
// asks for reasoning: set, without effort "none" or enabled false.
func chatReasoningAsks(v []byte) bool {
	return !jsonscan.IsNull(v) && !IsString(Field(v, "effort"), "none") &&
		string(jsonscan.TrimSpace(Field(v, "enabled"))) != "false"
}

// Without is the chat request without what drop names, and what it lost:
// for reasoning its reasoning_effort and reasoning; for tools its tools,
// functions, tool_choice, function_call and parallel_tool_calls; for
// JSON schema output its response_format. It leaves out only what the
// request uses (Needs), every other member kept byte for byte, and is
// the request itself when it loses nothing. drop may name only what is
// Droppable.
func (r *ChatRequest) Without(drop []Capability) (*ChatRequest, LeftOut, error) {
	set, err := ToDrop(drop)
	if err != nil {
		return nil, nil, err
	}
	m := r.Members
	var left LeftOut
	if set.Has(CapReasoning) {
		if chatEffortAsks(m["reasoning_effort"]) {
			left = append(left, "reasoning_effort")
		}
		if chatReasoningAsks(m["reasoning"]) {
			left = append(left, "reasoning")
		}
	}
	if set.Has(CapTools) && (NonEmpty(m["tools"]) || NonEmpty(m["functions"])) {
		left = present(m, left, "tools", "functions", "tool_choice", "function_call", "parallel_tool_calls")
	}
	if set.Has(CapJSONSchema) && IsString(Field(m["response_format"], "type"), "json_schema") {
		left = append(left, "response_format")
	}
	if len(left) == 0 {
		return r, nil, nil
	}
	body, err := editMembers(r.body(), dropNames(left))
	if err != nil {
		return nil, nil, err
	}
	out, err := ParseChatRequest(body)
	if err != nil {
		return nil, nil, err
	}
	return out, left, nil
}

// present appends to left those of names that m holds, but null.
func present(m map[string]json.RawMessage, left LeftOut, names ...string) LeftOut {
	for _, name := range names {
		if !jsonscan.IsNull(m[name]) {
			left = append(left, name)
		}
	}
	return left
}

// dropNames is editMembers' replacement that leaves out the members
// named.
func dropNames(names []string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(names))
	for _, n := range names {
		out[n] = nil
	}
	return out
}

// Needs is what the Messages request uses of its model: image blocks
// and document blocks (but a plain text one, which any model reads) in
// any turn, also in a tool_result's content; tools, the client's and
// the provider's alike; an output_format or output_config.format of type
// json_schema; thinking of type enabled or adaptive, or an
// output_config.effort, which is its Effort; max_tokens. Claude Code asks
// for thinking in every request.
func (r *MessagesRequest) Needs() Needs {
	m := r.Members
	uses := turnInputs(m["messages"])
	if NonEmpty(m["tools"]) {
		uses.Add(CapTools)
	}
	config := m["output_config"]
	if isSchema(m["output_format"]) || isSchema(Field(config, "format")) {
		uses.Add(CapJSONSchema)
	}
	effort := Field(config, "effort")
	if thinkingAsks(m["thinking"]) || !jsonscan.IsNull(effort) {
		uses.Add(CapReasoning)
	}
	return uses.Needs(EffortOf(effort), r.MaxTokens)
}

// turnInputs is the set of what the blocks of turns, a Messages request's
// messages, send of other kinds than text (see chatInputs).
func turnInputs(turns []byte) CapSet {
	var uses CapSet
	if !mayHold(turns, `"image"`, `"document"`) {
		return uses
	}
	eachElement(turns, func(turn []byte) {
		eachElement(Field(turn, "content"), func(block []byte) { blockInput(&uses, block, false) })
	})
	return uses
}

// blockFields are the members of a content block blockInput reads.
var blockFields = [...]string{"type", "source", "content"}

// blockInput adds to uses what a content block sends of other kinds than
// text: an image, a document, and those in a tool_result's content
// (unless nested, the content of one). A document whose source is plain
// text (type text) is text to every provider.
func blockInput(uses *CapSet, block []byte, nested bool) {
	var v [len(blockFields)][]byte
	Fields(block, blockFields[:], v[:])
	switch typ := v[0]; {
	case IsString(typ, "image"):
		uses.Add(CapImage)
	case IsString(typ, "document") && !IsString(Field(v[1], "type"), "text"):
		uses.Add(CapFile)
	case !nested && IsString(typ, "tool_result"):
		eachElement(v[2], func(b []byte) { blockInput(uses, b, true) })
	}
}

// isSchema reports whether format, a Messages request's output format,
// asks for JSON schema output.
func isSchema(format []byte) bool { return IsString(Field(format, "type"), "json_schema") }

// thinkingAsks reports whether a Messages request's thinking asks for
// thinking: of type enabled or adaptive (not disabled).
func thinkingAsks(v []byte) bool {
	typ := Field(v, "type")
	return IsString(typ, "enabled") || IsString(typ, "adaptive")
}

// Without is the Messages request without what drop names, and what it
// lost: for reasoning its thinking, output_config.effort and the
// clear_thinking edits of its context_management, which Anthropic takes
// only with thinking on; for tools its tools and tool_choice; for JSON
// schema output its output_format and output_config.format. The rest of
// output_config stays. It leaves out only what the request uses (Needs),
// every other member kept byte for byte, and is the request itself when
// it loses nothing. drop may name only what is Droppable.
//
// A conversation with tool calls in its turns keeps them when tools go:
// Anthropic refuses tool_use blocks without tools; serving such a
// conversation without tools is for models of providers that take it.
func (r *MessagesRequest) Without(drop []Capability) (*MessagesRequest, LeftOut, error) {
	set, err := ToDrop(drop)
	if err != nil {
		return nil, nil, err
	}
	m := r.Members
	replace := map[string]json.RawMessage{}
	var left LeftOut
	var config []string // the members of output_config that go
	if set.Has(CapReasoning) {
		if thinkingAsks(m["thinking"]) {
			replace["thinking"], left = nil, append(left, "thinking")
			if cm, ok := withoutClearThinking(m["context_management"]); ok {
				replace["context_management"], left = cm, append(left, "context_management clear_thinking")
			}
		}
		if !jsonscan.IsNull(Field(m["output_config"], "effort")) {
			config, left = append(config, "effort"), append(left, "output_config.effort")
		}
	}
	if set.Has(CapTools) && NonEmpty(m["tools"]) {
		left = present(m, left, "tools", "tool_choice")
		replace["tools"], replace["tool_choice"] = nil, nil
	}
	if set.Has(CapJSONSchema) {
		if isSchema(m["output_format"]) {
			replace["output_format"], left = nil, append(left, "output_format")
		}
		if isSchema(Field(m["output_config"], "format")) {
			config, left = append(config, "format"), append(left, "output_config.format")
		}
	}
	if len(left) == 0 {
		return r, nil, nil
	}
	if config != nil {
		replace["output_config"] = emptyAsNil(WithoutFields(m["output_config"], config...))
	}
	body, err := editMembers(r.Body, replace)
	if err != nil {
		return nil, nil, err
	}
	out, err := ParseMessagesRequest(body, r.MaxTokens == 0)
	if err != nil {
		return nil, nil, err
	}
	out.Version, out.Beta = r.Version, r.Beta
	return out, left, nil
}

// withoutClearThinking is a context_management without its
// clear_thinking edits (nil when nothing else is left of it), and whether
// it had any.
func withoutClearThinking(cm []byte) (json.RawMessage, bool) {
	edits := Field(cm, "edits")
	kept, changed := WithoutEntries(edits, func(edit []byte) bool {
		typ, _ := StringOf(Field(edit, "type"))
		return strings.HasPrefix(typ, "clear_thinking_")
	})
	if !changed {
		return nil, false
	}
	if string(kept) == "[]" {
		return emptyAsNil(WithoutFields(cm, "edits")), true
	}
	return editFields(cm, []string{"edits"}, kept), true
}

// emptyAsNil is obj, or nil when it is the empty object WithoutFields
// leaves: a member left with nothing in it goes too.
func emptyAsNil(obj []byte) json.RawMessage {
	if string(obj) == "{}" {
		return nil
	}
	return obj
}

// The readers and writers below take JSON already known to be valid (a
// parsed request's members); what is not of the shape they look for is
// not there.

// Field is the value of the JSON object obj that encoding/json decodes
// into a struct field named name: the last member whose key means name
// without regard to case and whose value is not null. It is nil when
// there is none or obj is no object.
func Field(obj []byte, name string) json.RawMessage {
	var v [1][]byte
	Fields(obj, []string{name}, v[:])
	return v[0]
}

// Fields puts in vals[i] the Field of obj named names[i], in one walk of
// obj: a walk reads the whole of every member, and an image's data is
// long.
func Fields(obj []byte, names []string, vals [][]byte) {
	clear(vals)
	it, ok := jsonscan.Entries(obj, jsonscan.SkipSpace(obj, 0))
	if !ok || !it.Object {
		return
	}
	for {
		m, more := it.Next()
		if !more {
			return
		}
		if jsonscan.IsNull(m.Value) {
			continue
		}
		for i, name := range names {
			if keyMeans(m, name) {
				vals[i] = m.Value
			}
		}
	}
}

// keyMeans reports whether encoding/json takes the key of m for a field
// named name.
func keyMeans(m jsonscan.Member, name string) bool {
	if !jsonscan.KeyMayMean(m.Key, name) {
		return false
	}
	if bytes.IndexByte(m.Key, '\\') < 0 && isASCII(m.Key) {
		return true // KeyMayMean compared it
	}
	return strings.EqualFold(memberName(m), name)
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// IsString reports whether v is a JSON string whose value is s.
func IsString(v []byte, s string) bool {
	if plain, ok := plainString(v); ok {
		return string(plain) == s
	}
	got, ok := StringOf(v)
	return ok && got == s
}

// StringOf is the value of v, a JSON string; false for another value.
func StringOf(v []byte) (string, bool) {
	if jsonscan.Kind(jsonscan.TrimSpace(v)) != jsonscan.String {
		return "", false
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// efforts are the reasoning efforts clients send, which a request's
// Needs shares rather than copies.
var efforts = [...]string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// EffortOf is the reasoning effort v, a JSON string, names; "" for any
// other value.
func EffortOf(v []byte) string {
	plain, ok := plainString(v)
	if !ok {
		s, _ := StringOf(v)
		return s
	}
	for _, e := range efforts {
		if string(plain) == e {
			return e
		}
	}
	return string(plain)
}

// NonEmpty reports whether v holds something: it is not absent, null or
// an empty array. Tools that are no array count: the provider refuses
// them as the model's tools.
func NonEmpty(v []byte) bool {
	v = jsonscan.TrimSpace(v)
	if jsonscan.IsNull(v) {
		return false
	}
	// An array's first element is not read: the tools are long.
	i := jsonscan.SkipSpace(v, 1)
	return v[0] != '[' || i < len(v) && v[i] != ']'
}

// eachElement calls f with each element of the JSON array arr; not at
// all when arr is no array.
func eachElement(arr []byte, f func(elem []byte)) {
	it, ok := jsonscan.Entries(arr, jsonscan.SkipSpace(arr, 0))
	if !ok || it.Object {
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

// mayHold reports whether raw may hold one of words: it does, or has an
// escape, which may spell one otherwise ("im\u0061ge").
func mayHold(raw []byte, words ...string) bool {
	for _, w := range words {
		if bytes.Contains(raw, []byte(w)) {
			return true
		}
	}
	return bytes.Contains(raw, []byte(`\u`))
}

// Underscored reports whether an underscore in raw is followed by one of
// tails: a search for the types of parts ("input_image") in one pass,
// which a search for each type would make several of, and slower ones
// (bytes.Index is slow to find words that begin with a quote in JSON,
// which is full of quotes).
func Underscored(raw []byte, tails ...string) bool {
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '_')
		if j < 0 {
			return false
		}
		i += j + 1
		for _, t := range tails {
			if bytes.HasPrefix(raw[i:], []byte(t)) {
				return true
			}
		}
	}
}

// WithoutFields is the JSON object obj without the members whose keys
// mean one of names as encoding/json reads keys (see Field), the others
// kept, their keys and values byte for byte; obj itself when it has none
// of them or is no object.
func WithoutFields(obj []byte, names ...string) json.RawMessage {
	return editFields(obj, names, nil)
}

// editFields is the JSON object obj with v as the value of each member
// whose key means one of names (nil leaves them out), the others kept,
// their keys and values byte for byte; obj itself when it has none of
// them or is no object.
func editFields(obj []byte, names []string, v []byte) json.RawMessage {
	it, ok := jsonscan.Entries(obj, jsonscan.SkipSpace(obj, 0))
	if !ok || !it.Object {
		return obj
	}
	out := append(make([]byte, 0, len(obj)+len(v)), '{')
	edited := false
	for {
		m, more := it.Next()
		if !more {
			break
		}
		value := m.Value
		if anyKeyMeans(m, names) {
			if edited = true; v == nil {
				continue
			}
			value = v
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, '"'), m.Key...), '"', ':')
		out = append(out, value...)
	}
	if !edited {
		return obj
	}
	return append(out, '}')
}

func anyKeyMeans(m jsonscan.Member, names []string) bool {
	for _, name := range names {
		if keyMeans(m, name) {
			return true
		}
	}
	return false
}

// WithoutEntries is the JSON array arr without the entries drop reports,
// the others kept byte for byte, and whether it dropped any (arr itself
// when it did not, or is no array).
func WithoutEntries(arr []byte, drop func(entry []byte) bool) (json.RawMessage, bool) {
	it, ok := jsonscan.Entries(arr, jsonscan.SkipSpace(arr, 0))
	if !ok || it.Object {
		return arr, false
	}
	out := append(make([]byte, 0, len(arr)), '[')
	dropped := false
	for {
		e, more := it.Next()
		if !more {
			break
		}
		if drop(e.Value) {
			dropped = true
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, e.Value...)
	}
	if !dropped {
		return arr, false
	}
	return append(out, ']'), true
}
