package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"modelgate/translate/jsonscan"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// chunkFix checks a chat completion chunk against the schema, as far as
// clients and the gateway read it, and plans the byte edits that repair
// it: a null the schema does not allow means absent, so the member or
// array element is dropped (or, where the member is required, replaced by
// an empty choices array or delta object); typed content parts are
// flattened (Quirks.ContentParts); tool call deltas without an index get
// their call's (toolCallIndexes). Any other wrong type is not repaired:
// bad names the first such member, and the stream ends with an error.
//
// It works on the chunk's bytes as the provider sent them: a valid chunk
// costs one scan and no allocation, and a repaired one keeps the
// provider's member order and formatting.
type chunkFix struct {
	doc   []byte
	parts bool // Quirks.ContentParts
	// vendor: the answer is a compatible server's, whose own members are
	// removed (foreign).
	vendor bool
	edits  []edit
	bad    string // the path of the first member of a wrong type
	// calls is the stream's tool call indexes; reset keeps it.
	calls toolCallIndexes
	// model is the model the client asked for, which the answer names
	// whatever id the provider answered with: clients compare the two
	// (Claude Code drops the signed thinking of an answer of another
	// model). quoted is it as a JSON string, made when first needed
	// unless the request has it (answerFix).
	model  string
	quoted []byte
}

// edit replaces doc[start:end] with repl.
type edit struct {
	Start, End int
	repl       []byte
}

// chunkObject is the object member of every chat completion chunk.
const chunkObject = `"chat.completion.chunk"`

var (
	emptyArray  = []byte("[]")
	emptyObject = []byte("{}")
)

func (f *chunkFix) reset(doc []byte, parts, vendor bool) {
	f.doc, f.parts, f.vendor, f.edits, f.bad = doc, parts, vendor, f.edits[:0], ""
}

// The members OpenAI's schema names at the top of a chat completion or
// chunk, and in its choices. A server of the compatible family adds its
// own (Groq's x_groq, OpenRouter's provider and native_finish_reason,
// vLLM's stop_reason), which are removed: clients of the gateway get
// OpenAI's answer, whichever server gave it.
var (
	answerMembers = []string{"id", "object", "created", "model", "choices", "usage", "service_tier", "system_fingerprint"}
	choiceMembers = []string{"index", "message", "delta", "finish_reason", "logprobs"}
)

// foreign reports a member of a compatible server's own, at the top of
// an answer or chunk (names: answerMembers) or in a choice
// (choiceMembers).
func (f *chunkFix) foreign(m jsonscan.Member, names []string) bool {
	return f.vendor && !slices.Contains(names, string(name(m.Key)))
}

func (f *chunkFix) fail(path string) {
	if f.bad == "" {
		f.bad = path
	}
}

func (f *chunkFix) replace(m jsonscan.Member, repl []byte) {
	f.edits = append(f.edits, edit{Start: m.VS, End: m.End, repl: repl})
}

// echoModel gives a model member of the answer the client's model; one
// that already names it, as a provider that knows the model by the
// client's name sends, is left as it came.
func (f *chunkFix) echoModel(m jsonscan.Member) {
	if !jsonscan.IsText(m.Value, f.model) {
		f.replace(m, f.modelJSON())
	}
}

// modelJSON is the client's model as a JSON string.
func (f *chunkFix) modelJSON() []byte {
	if f.quoted == nil {
		f.quoted = jsonscan.AppendQuoted(nil, f.model)
	}
	return f.quoted
}

// apply appends doc with the edits made. Edits inside a dropped member
// are skipped with it.
func (f *chunkFix) apply(dst []byte) []byte { return f.applyRange(dst, 0, len(f.doc)) }

// applyRange appends doc[lo:hi] with the edits inside it made.
func (f *chunkFix) applyRange(dst []byte, lo, hi int) []byte {
	if len(f.edits) == 0 {
		return append(dst, f.doc[lo:hi]...)
	}
	// Edits are mostly made in order; content parts and the dropped
	// members of the top level come after the members they precede.
	if byPos := func(a, b edit) int { return cmp.Or(a.Start-b.Start, a.End-b.End) }; !slices.IsSortedFunc(f.edits, byPos) {
		slices.SortFunc(f.edits, byPos)
	}
	prev := lo
	for _, e := range f.edits {
		if e.Start < prev || e.End > hi {
			continue
		}
		dst = append(dst, f.doc[prev:e.Start]...)
		dst = append(dst, e.repl...)
		prev = e.End
	}
	return append(dst, f.doc[prev:hi]...)
}

// dropper removes entries of one object or array and leaves valid JSON:
// an entry after a kept one goes with its leading comma, and the entries
// before the first kept one go up to that one's comma.
type dropper struct {
	kept    bool
	pending int // start of the dropped entries before the first kept one, or -1
	last    int // end of the last of them
}

func newDropper() dropper { return dropper{pending: -1} }

func (f *chunkFix) drop(d *dropper, m jsonscan.Member) {
	if d.kept {
		f.edits = append(f.edits, edit{Start: m.Start, End: m.End})
		return
	}
	if d.pending < 0 {
		d.pending = m.Start
	}
	d.last = m.End
}

func (f *chunkFix) keep(d *dropper, m jsonscan.Member) {
	if d.pending >= 0 {
		// m follows an entry, so a comma precedes its key or value
		comma := m.Start + bytes.IndexByte(f.doc[m.Start:m.VS], ',')
		f.edits = append(f.edits, edit{Start: d.pending, End: comma + 1})
		d.pending = -1
	}
	d.kept = true
}

func (f *chunkFix) close(d *dropper) {
	if d.pending >= 0 {
		f.edits = append(f.edits, edit{Start: d.pending, End: d.last})
	}
}

// name is a member's key, unescaped if it has escapes: a client reads
// "delt\u0061" as delta.
func name(key []byte) []byte {
	if bytes.IndexByte(key, '\\') < 0 {
		return key
	}
	var s string
	quoted := make([]byte, 0, len(key)+2)
	quoted = append(append(append(quoted, '"'), key...), '"')
	if json.Unmarshal(quoted, &s) != nil {
		return key
	}
	return []byte(s)
}

// want fails path unless v is of kind k.
func (f *chunkFix) want(v []byte, k byte, path string) {
	if jsonscan.Kind(v) != k {
		f.fail(path)
	}
}

func (f *chunkFix) wantInt(v []byte, path string) {
	if !jsonscan.IsInt(v) {
		f.fail(path)
	}
}

// top checks the top-level members other than choices and usage that
// clients read.
func (f *chunkFix) top(m jsonscan.Member) {
	if jsonscan.IsNull(m.Value) {
		return // dropped by the caller
	}
	switch string(name(m.Key)) {
	case "id":
		f.want(m.Value, jsonscan.String, "id")
	case "model":
		if f.want(m.Value, jsonscan.String, "model"); jsonscan.Kind(m.Value) == jsonscan.String {
			f.echoModel(m)
		}
	case "object":
		// Azure opens a stream with a prompt_filter_results chunk whose
		// object is "": the schema allows only chat.completion.chunk.
		if f.want(m.Value, jsonscan.String, "object"); jsonscan.Kind(m.Value) == jsonscan.String && string(m.Value) != chunkObject {
			f.replace(m, []byte(chunkObject))
		}
	case "created":
		f.wantInt(m.Value, "created")
	}
}

// choices checks the choices member and reports whether it has no choice
// left.
func (f *chunkFix) choices(m jsonscan.Member) (empty bool) {
	switch jsonscan.Kind(m.Value) {
	case jsonscan.Null:
		f.replace(m, emptyArray) // required: no choices
		return true
	case jsonscan.Array:
	default:
		f.fail("choices")
		return false
	}
	it, _ := jsonscan.Entries(f.doc, m.VS)
	d := newDropper()
	kept := 0
	for {
		ch, ok := it.Next()
		if !ok {
			break
		}
		switch jsonscan.Kind(ch.Value) {
		case jsonscan.Null:
			f.drop(&d, ch)
			continue
		case jsonscan.Object:
		default:
			f.fail("choices[]")
			continue
		}
		f.keep(&d, ch)
		f.choice(ch, kept)
		kept++
	}
	f.close(&d)
	return kept == 0
}

// choice checks one choice, and adds the members the schema requires
// that a provider left out (index, delta, finish_reason). pos is the
// choice's position, its index when it has none.
func (f *chunkFix) choice(ch jsonscan.Member, pos int) {
	it, _ := jsonscan.Entries(f.doc, ch.VS)
	var hasIndex, hasDelta, hasFinish bool
	var delta jsonscan.Member
	index, n := pos, 0
	d := newDropper()
	for {
		m, ok := it.Next()
		if !ok {
			break
		}
		if f.foreign(m, choiceMembers) {
			f.drop(&d, m)
			continue
		}
		f.keep(&d, m)
		n++
		switch string(name(m.Key)) {
		case "index":
			hasIndex = true
			f.wantInt(m.Value, "choices[].index")
			if i, ok := smallInt(m.Value); ok {
				index = i
			}
		case "delta":
			hasDelta = true
			switch jsonscan.Kind(m.Value) {
			case jsonscan.Null:
				f.replace(m, emptyObject) // required: an empty delta
			case jsonscan.Object:
				delta = m // once the choice's index is known
			default:
				f.fail("choices[].delta")
			}
		case "finish_reason":
			hasFinish = true
			if k := jsonscan.Kind(m.Value); k != jsonscan.String && k != jsonscan.Null {
				f.fail("choices[].finish_reason")
			}
			if r, ok := finishReason(m.Value); !ok {
				f.replace(m, r)
			}
		case "logprobs":
			if k := jsonscan.Kind(m.Value); k != jsonscan.Object && k != jsonscan.Null {
				f.fail("choices[].logprobs")
			}
		}
	}
	f.close(&d)
	if delta.Value != nil {
		f.delta(delta, index)
	}
	var add []byte
	addMember := func(m string) {
		if n > 0 || len(add) > 0 {
			add = append(add, ',')
		}
		add = append(add, m...)
	}
	if !hasIndex {
		addMember(`"index":` + strconv.Itoa(pos))
	}
	if !hasDelta {
		addMember(`"delta":{}`)
	}
	if !hasFinish {
		addMember(`"finish_reason":null`)
	}
	if len(add) > 0 { // before the closing brace
		end := ch.VS + len(ch.Value) - 1
		f.edits = append(f.edits, edit{Start: end, End: end, repl: add})
	}
}

// smallInt is v as an int when it is a JSON integer in [0, 2^31).
func smallInt(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n < 1<<31
}

// delta drops null members other than content and refusal (vLLM and
// others send "role": null or "tool_calls": null), flattens typed
// content parts and gives tool calls their index; choice is the choice's
// index.
func (f *chunkFix) delta(dm jsonscan.Member, choice int) {
	it, _ := jsonscan.Entries(f.doc, dm.VS)
	d := newDropper()
	var parts, reasoning jsonscan.Member
	hasParts, hasReasoning := false, false
	for {
		m, ok := it.Next()
		if !ok {
			break
		}
		key := string(name(m.Key))
		k := jsonscan.Kind(m.Value)
		if k == jsonscan.Null && key != "content" && key != "refusal" {
			f.drop(&d, m)
			continue
		}
		f.keep(&d, m)
		switch key {
		case "role":
			f.want(m.Value, jsonscan.String, "choices[].delta.role")
		case "content":
			switch {
			case k == jsonscan.Array && f.parts:
				parts, hasParts = m, true
			case k != jsonscan.String && k != jsonscan.Null:
				f.fail("choices[].delta.content")
			}
		case "refusal":
			if k != jsonscan.String && k != jsonscan.Null {
				f.fail("choices[].delta.refusal")
			}
		case "reasoning_content":
			f.want(m.Value, jsonscan.String, "choices[].delta.reasoning_content")
			reasoning, hasReasoning = m, true
		case "reasoning":
			f.want(m.Value, jsonscan.String, "choices[].delta.reasoning")
		case "tool_calls":
			if k != jsonscan.Array {
				f.fail("choices[].delta.tool_calls")
				continue
			}
			f.toolCalls(m, choice)
		case "function_call":
			if k != jsonscan.Object {
				f.fail("choices[].delta.function_call")
				continue
			}
			f.function(m, "choices[].delta.function_call")
		}
	}
	f.close(&d)
	if hasParts {
		f.flatten(parts, reasoning, hasReasoning)
	}
}

// toolCalls checks a delta's tool calls and gives those without an index
// (Mistral's; a null index is none) the index of their call, from the
// stream's toolCallIndexes.
func (f *chunkFix) toolCalls(arr jsonscan.Member, choice int) {
	it, _ := jsonscan.Entries(f.doc, arr.VS)
	d := newDropper()
	for {
		tc, ok := it.Next()
		if !ok {
			break
		}
		switch jsonscan.Kind(tc.Value) {
		case jsonscan.Null:
			f.drop(&d, tc)
			continue
		case jsonscan.Object:
		default:
			f.fail("choices[].delta.tool_calls[]")
			continue
		}
		f.keep(&d, tc)
		members, _ := jsonscan.Entries(f.doc, tc.VS)
		md := newDropper()
		var index, id []byte
		for {
			m, ok := members.Next()
			if !ok {
				break
			}
			if jsonscan.IsNull(m.Value) {
				f.drop(&md, m)
				continue
			}
			f.keep(&md, m)
			switch key := name(m.Key); string(key) {
			case "index":
				index = m.Value
				f.wantInt(m.Value, "choices[].delta.tool_calls[].index")
			case "id", "type":
				if jsonscan.Kind(m.Value) != jsonscan.String {
					f.fail("choices[].delta.tool_calls[]." + string(key))
				} else if string(key) == "id" {
					id = m.Value
				}
			case "function":
				if jsonscan.Kind(m.Value) != jsonscan.Object {
					f.fail("choices[].delta.tool_calls[].function")
					continue
				}
				f.function(m, "choices[].delta.tool_calls[].function")
			}
		}
		f.close(&md)
		if index != nil {
			if i, ok := smallInt(index); ok {
				f.calls.sent(choice, i)
			}
			continue
		}
		end := tc.VS + len(tc.Value) - 1 // before the closing brace
		f.edits = append(f.edits, edit{Start: end, End: end, repl: indexMember(f.calls.assign(choice, id), md.kept)})
	}
	f.close(&d)
}

// function checks a function (call) object: name and arguments are
// strings; nulls are dropped.
func (f *chunkFix) function(fm jsonscan.Member, path string) {
	it, _ := jsonscan.Entries(f.doc, fm.VS)
	d := newDropper()
	for {
		m, ok := it.Next()
		if !ok {
			break
		}
		if jsonscan.IsNull(m.Value) {
			f.drop(&d, m)
			continue
		}
		f.keep(&d, m)
		if key := name(m.Key); (string(key) == "name" || string(key) == "arguments") && jsonscan.Kind(m.Value) != jsonscan.String {
			f.fail(path + "." + string(key))
		}
	}
	f.close(&d)
}

// toolCallIndexes is what a stream needs to give tool call deltas without
// an index the one OpenAI's chunk schema requires, per choice: a call's id
// keeps the index it got first, a new id gets the next index (first 0),
// and a delta without id continues the last call. Indexes the provider
// sent move the last call and the next index but are not remembered by
// id: a provider sends them on every delta or on none, and so a stream
// that needs no repair allocates nothing here.
type toolCallIndexes struct {
	first choiceCalls   // choice 0, the one choice of nearly every stream
	more  []choiceCalls // other choices, made by their first repair
}

// choiceCalls are one choice's tool calls.
type choiceCalls struct {
	choice int
	seen   bool // a call was seen; last is its index
	last   int
	next   int // one past the highest index seen
	ids    []callID
}

type callID struct {
	id    string // the JSON string as sent
	index int
}

// Bounds on what a provider's stream can make a translator keep: choices
// past maxChoices share the last one's state, and ids past maxCallIDs get
// new indexes but are not remembered.
const (
	maxChoices = 64
	maxCallIDs = 256
)

// of returns the calls of choice; choices other than 0 are made only when
// create is set (a repair), otherwise nil if absent.
func (t *toolCallIndexes) of(choice int, create bool) *choiceCalls {
	if choice == 0 {
		return &t.first
	}
	for i := range t.more {
		if t.more[i].choice == choice {
			return &t.more[i]
		}
	}
	switch {
	case !create:
		return nil
	case len(t.more) >= maxChoices:
		return &t.more[len(t.more)-1]
	}
	t.more = append(t.more, choiceCalls{choice: choice})
	return &t.more[len(t.more)-1]
}

// sent notes a delta of choice whose index was sent.
func (t *toolCallIndexes) sent(choice, index int) {
	if c := t.of(choice, false); c != nil {
		c.at(index)
	}
}

func (c *choiceCalls) at(index int) {
	c.seen, c.last, c.next = true, index, max(c.next, index+1)
}

// assign returns the index of a delta of choice that has none; id is its
// id as sent, nil if it has none.
func (t *toolCallIndexes) assign(choice int, id []byte) int {
	c := t.of(choice, true)
	switch {
	case id != nil:
		for _, k := range c.ids {
			if k.id == string(id) {
				c.at(k.index)
				return k.index
			}
		}
		if len(c.ids) < maxCallIDs {
			c.ids = append(c.ids, callID{id: string(id), index: c.next})
		}
	case c.seen:
		return c.last
	}
	c.at(c.next)
	return c.last
}

// flatten turns typed content parts (Mistral streams thinking this way)
// into OpenAI's string content, and thinking text into reasoning_content.
func (f *chunkFix) flatten(content, reasoning jsonscan.Member, hasReasoning bool) {
	var parts []any
	json.Unmarshal(content.Value, &parts) //nolint:errcheck // a valid array
	var text, thinking strings.Builder
	partsText(parts, &text, &thinking)
	f.replace(content, appendString(nil, text.String()))
	if thinking.Len() == 0 {
		return
	}
	if hasReasoning {
		var prev string
		json.Unmarshal(reasoning.Value, &prev) //nolint:errcheck // checked to be a string
		f.replace(reasoning, appendString(nil, prev+thinking.String()))
		return
	}
	f.edits = append(f.edits, edit{Start: content.End, End: content.End,
		repl: appendString([]byte(`,"reasoning_content":`), thinking.String())})
}

// partsText collects the text of text parts and of thinking parts' inner
// text parts; other parts and values of other shapes carry nothing.
func partsText(parts []any, text, thinking *strings.Builder) {
	for _, p := range parts {
		part, _ := p.(map[string]any)
		switch part["type"] {
		case "text":
			s, _ := part["text"].(string)
			text.WriteString(s)
		case "thinking":
			inner, _ := part["thinking"].([]any)
			partsText(inner, thinking, thinking)
		}
	}
}

// appendString appends s as a JSON string. Unlike encoding/json it does
// not escape <, > and &: the text stays as long as the provider sent it.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// indexMembers are `,"index":N` for the first tool calls of a choice,
// made once: the member a call's delta without an index gets.
var indexMembers = func() (m [32][]byte) {
	for i := range m {
		m[i] = strconv.AppendInt([]byte(`,"index":`), int64(i), 10)
	}
	return m
}()

// indexMember is the member `"index":i`, after a comma when others
// precede it.
func indexMember(i int, comma bool) []byte {
	var m []byte
	if i >= 0 && i < len(indexMembers) {
		m = indexMembers[i]
	} else {
		m = strconv.AppendInt([]byte(`,"index":`), int64(i), 10)
	}
	if !comma {
		return m[1:]
	}
	return m
}
