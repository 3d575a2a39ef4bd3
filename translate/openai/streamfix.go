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
// flattened (Quirks.ContentParts). Any other wrong type is not repaired:
// bad names the first such member, and the stream ends with an error.
//
// It works on the chunk's bytes as the provider sent them: a valid chunk
// costs one scan and no allocation, and a repaired one keeps the
// provider's member order and formatting.
type chunkFix struct {
	doc   []byte
	parts bool // Quirks.ContentParts
	edits []edit
	bad   string // the path of the first member of a wrong type
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

func (f *chunkFix) reset(doc []byte, parts bool) {
	f.doc, f.parts, f.edits, f.bad = doc, parts, f.edits[:0], ""
}

func (f *chunkFix) fail(path string) {
	if f.bad == "" {
		f.bad = path
	}
}

func (f *chunkFix) replace(m jsonscan.Member, repl []byte) {
	f.edits = append(f.edits, edit{Start: m.VS, End: m.End, repl: repl})
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
		f.want(m.Value, jsonscan.String, "model")
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
// that a provider left out (index, delta, finish_reason).
func (f *chunkFix) choice(ch jsonscan.Member, pos int) {
	it, _ := jsonscan.Entries(f.doc, ch.VS)
	var hasIndex, hasDelta, hasFinish bool
	n := 0
	defer func() {
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
	}()
	for {
		m, ok := it.Next()
		if !ok {
			return
		}
		n++
		switch string(name(m.Key)) {
		case "index":
			hasIndex = true
			f.wantInt(m.Value, "choices[].index")
		case "delta":
			hasDelta = true
			switch jsonscan.Kind(m.Value) {
			case jsonscan.Null:
				f.replace(m, emptyObject) // required: an empty delta
			case jsonscan.Object:
				f.delta(m)
			default:
				f.fail("choices[].delta")
			}
		case "finish_reason":
			hasFinish = true
			if k := jsonscan.Kind(m.Value); k != jsonscan.String && k != jsonscan.Null {
				f.fail("choices[].finish_reason")
			}
		case "logprobs":
			if k := jsonscan.Kind(m.Value); k != jsonscan.Object && k != jsonscan.Null {
				f.fail("choices[].logprobs")
			}
		}
	}
}

// delta drops null members other than content and refusal (vLLM and
// others send "role": null or "tool_calls": null) and flattens typed
// content parts.
func (f *chunkFix) delta(dm jsonscan.Member) {
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
			f.toolCalls(m)
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

func (f *chunkFix) toolCalls(arr jsonscan.Member) {
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
		for {
			m, ok := members.Next()
			if !ok {
				break
			}
			key := string(name(m.Key))
			if jsonscan.IsNull(m.Value) && key != "index" {
				f.drop(&md, m)
				continue
			}
			f.keep(&md, m)
			switch key {
			case "index":
				f.wantInt(m.Value, "choices[].delta.tool_calls[].index")
			case "id", "type":
				if jsonscan.Kind(m.Value) != jsonscan.String {
					f.fail("choices[].delta.tool_calls[]." + key)
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
	}
	f.close(&d)
}

// function checks a function (call) object: name and arguments are
// strings; nulls are dropped.
func (f *chunkFix) function(fm jsonscan.Member, path string) {
	f.nonNull(fm, func(m jsonscan.Member, key string) {
		if (key == "name" || key == "arguments") && jsonscan.Kind(m.Value) != jsonscan.String {
			f.fail(path + "." + key)
		}
	})
}

// nonNull drops an object's null members and visits the others.
func (f *chunkFix) nonNull(obj jsonscan.Member, visit func(m jsonscan.Member, key string)) {
	it, _ := jsonscan.Entries(f.doc, obj.VS)
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
		visit(m, string(name(m.Key)))
	}
	f.close(&d)
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
