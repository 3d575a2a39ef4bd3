package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"modelgate/translate"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// Rules say what a capture hides. Credentials of the formats in
// secretFormats (secrets.go) are always hidden; the server adds the
// providers' own credentials to Secrets.
type Rules struct {
	// Members are JSON member names, matched without regard to case, whose
	// values are replaced whole, at any depth (such as "content" or
	// "input"). In Responses API stream events (a "type" starting
	// "response.") "content" also covers the text members "delta", "text",
	// "part", "refusal" and "transcript", and "logprobs"; the "delta" of
	// argument and input events is also covered by "arguments" and
	// "input". In every answer, "content" also covers the generated text
	// its translator reports, whatever the client API's member (a Messages
	// stream's text_delta), and "arguments" and "input" a tool call's
	// (Hides).
	Members []string
	// Patterns are replaced wherever they match in the bodies' strings.
	Patterns []*regexp.Regexp
	// Secrets are exact strings hidden wherever they occur; the server
	// adds its backends' credentials. Strings shorter than MinSecretLen
	// are ignored.
	Secrets []string
}

// Redacted replaces what a rule hides.
const Redacted = "[redacted]"

// MinSecretLen is the shortest exact secret hidden: shorter ones would
// hide ordinary words.
const MinSecretLen = 8

// Apply redacts a body: a JSON document member by member, an event
// stream event by event, anything else as text. A body that is cut, or
// whose JSON does not parse, cannot be redacted by member: with member
// rules it is not kept at all.
//
// Credentials are looked for in three passes: in every string of the
// body; in the strings of a stream that sit at the same place of their
// events, joined in order (a key a provider streamed in pieces, split
// across events or chunks, is found in the joined text and hidden in
// every piece); and in the redacted text as it will be kept (a key that
// JSON escapes or member names hid from the first two). The whole body is
// at hand when the exchange ends, so streams are redacted on their joined
// text rather than by carrying a tail from chunk to chunk.
func (r Rules) Apply(body []byte, truncated bool) string {
	if len(body) == 0 {
		return ""
	}
	return r.Scrub(r.redact(body, truncated))
}

func (r Rules) redact(body []byte, truncated bool) string {
	if trimmed := bytes.TrimSpace(body); !truncated && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		if doc, ok := decodeJSON(trimmed); ok {
			var ls []leaf
			r.walk(doc, "", &ls)
			r.redactLeaves(ls, nil)
			if out, err := json.Marshal(doc[0]); err == nil {
				return string(out)
			}
		}
	}
	if isEventStream(body) {
		return r.stream(body, truncated)
	}
	if r.unsafe(body) {
		return fmt.Sprintf("[%d bytes not kept: cut or not JSON, so they could not be redacted by member]", len(body))
	}
	return r.text(string(body))
}

// isEventStream reports a body whose first line is a server-sent event's
// field or comment.
func isEventStream(body []byte) bool {
	for _, f := range []string{"data:", "event:", "id:", "retry:", ":"} {
		if bytes.HasPrefix(body, []byte(f)) {
			return true
		}
	}
	return false
}

// unsafe reports text that member rules could not be applied to but
// might be about: it holds JSON's brackets or a member's quoted name.
func (r Rules) unsafe(b []byte) bool {
	if len(r.Members) == 0 {
		return false
	}
	if bytes.ContainsAny(b, "{[") {
		return true
	}
	lower := bytes.ToLower(b)
	for _, m := range r.Members {
		if bytes.Contains(lower, []byte(`"`+strings.ToLower(m)+`"`)) {
			return true
		}
	}
	if r.member("content") {
		for _, m := range eventTextMembers {
			if bytes.Contains(lower, []byte(`"`+m+`"`)) {
				return true
			}
		}
	}
	return false
}

// streamPart is a line of a stream being redacted: literal text kept as
// is, or a document (JSON, or a text leaf) marshaled once every event's
// strings are redacted.
type streamPart struct {
	prefix string
	lit    string
	doc    []any // the document in a one-element holder
	json   bool
}

// stream redacts an event stream's lines, the strings of all its events
// together (see Apply). The lines that are not JSON events are searched
// together too, as the body has them, before any is dropped: a
// credential written over several lines (a PEM block) is hidden in every
// line kept even when the line that shows what it is (its header) is
// dropped as unsafe, or is redacted as another text (a "data:" line's
// text, and the lines after it).
func (r Rules) stream(body []byte, truncated bool) string {
	lines := bytes.Split(body, []byte("\n"))
	parts := make([]streamPart, 0, len(lines))
	var ls []leaf
	var text textLines
	for i, line := range lines {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		last := i == len(lines)-1
		switch {
		case !ok && r.unsafe(line):
			text.add(line, -1, 0)
			parts = append(parts, streamPart{lit: "[not kept: could not be redacted by member]"})
		case !ok:
			text.add(line, len(ls), 0)
			p := streamPart{doc: []any{string(line)}}
			ls = append(ls, leaf{path: "line", s: string(line), a: p.doc})
			parts = append(parts, p)
		case last && truncated: // a cut event: neither parsed nor kept
			text.add(line, -1, 0)
			parts = append(parts, streamPart{lit: "data: [cut]"})
		default:
			rest := bytes.TrimLeftFunc(data, unicode.IsSpace)
			d := bytes.TrimRightFunc(rest, unicode.IsSpace)
			if string(d) == "[DONE]" {
				parts = append(parts, streamPart{lit: "data: [DONE]"})
			} else if doc, ok := decodeJSON(d); ok {
				r.walk(doc, "", &ls)
				parts = append(parts, streamPart{prefix: "data: ", doc: doc, json: true})
			} else if r.unsafe(d) {
				text.add(line, -1, 0)
				parts = append(parts, streamPart{lit: "data: [not kept: could not be redacted by member]"})
			} else {
				text.add(line, len(ls), len(line)-len(rest))
				p := streamPart{prefix: "data: ", doc: []any{string(d)}}
				ls = append(ls, leaf{path: "data", s: string(d), a: p.doc})
				parts = append(parts, p)
			}
		}
	}
	r.redactLeaves(ls, text.find(r, ls))
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case p.doc == nil:
			b.WriteString(p.lit)
		case !p.json:
			b.WriteString(p.prefix + p.doc[0].(string))
		default:
			out, err := json.Marshal(p.doc[0])
			if err != nil {
				b.WriteString(p.prefix + "[not kept]")
				continue
			}
			b.WriteString(p.prefix)
			b.Write(out)
		}
	}
	return b.String()
}

// textLines are the lines of a stream that are neither JSON events nor
// empty, each with the leaf its text became, to be searched together as
// the body has them (see stream).
type textLines struct {
	b      []byte // the lines, each ended by a newline
	starts []int  // where each line starts in b
	leaves []int  // the leaf each line's text became, or -1 for a line dropped
	offs   []int  // where that leaf's text starts in its line
}

func (t *textLines) add(line []byte, leaf, off int) {
	if len(line) == 0 { // nothing to find, and nothing a match needs
		return
	}
	t.starts = append(t.starts, len(t.b))
	t.leaves = append(t.leaves, leaf)
	t.offs = append(t.offs, off)
	t.b = append(append(t.b, line...), '\n')
}

// find returns the spans of the leaves ls that the rules find in the
// lines, by leaf.
func (t *textLines) find(r Rules, ls []leaf) map[int][][2]int {
	if len(t.starts) < 2 { // one line is its own leaf's text, searched as it
		return nil
	}
	var pre map[int][][2]int
	r.find(string(t.b), func(a, b int) {
		j := sort.Search(len(t.starts), func(j int) bool { return t.starts[j] > a }) - 1
		for ; j < len(t.starts) && t.starts[j] < b; j++ {
			k := t.leaves[j]
			if k < 0 {
				continue
			}
			start := t.starts[j] + t.offs[j]
			if lo, hi := max(a, start), min(b, start+len(ls[k].s)); hi > lo {
				if pre == nil {
					pre = map[int][][2]int{}
				}
				pre[k] = append(pre[k], [2]int{lo - start, hi - start})
			}
		}
	})
	return pre
}

// decodeJSON parses a JSON document into a one-element holder (so that a
// document that is a string has a place to be replaced in); ok is false
// when it does not parse.
func decodeJSON(doc []byte) ([]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return []any{v}, true
}

// leaf is a string of a JSON document, where it is and how to replace it.
type leaf struct {
	// path is where the string sits, array indexes left out: the strings
	// of a stream's events at the same path are one text.
	path string
	s    string
	m    map[string]any // its map and member, or
	k    string
	a    []any // its array and index
	i    int
}

func (l *leaf) set(s string) {
	if l.m != nil {
		l.m[l.k] = s
	} else {
		l.a[l.i] = s
	}
}

// eventTextMembers are the members of Responses stream events that
// "content" covers: their text, and the logprobs that repeat it token by
// token.
var eventTextMembers = []string{"delta", "text", "part", "refusal", "transcript", "logprobs"}

// walk replaces the members the rules name and gathers the strings left.
func (r Rules) walk(v any, path string, ls *[]leaf) {
	switch v := v.(type) {
	case map[string]any:
		typ, _ := v["type"].(string)
		if !strings.HasPrefix(typ, "response.") {
			typ = ""
		}
		for k, m := range v {
			if r.member(k) || (typ != "" && r.eventMember(typ, k)) {
				v[k] = Redacted
				continue
			}
			p := path + "." + k
			if s, ok := m.(string); ok {
				*ls = append(*ls, leaf{path: p, s: s, m: v, k: k})
				continue
			}
			r.walk(m, p, ls)
		}
	case []any:
		p := path + "[]"
		for i, e := range v {
			if s, ok := e.(string); ok {
				*ls = append(*ls, leaf{path: p, s: s, a: v, i: i})
				continue
			}
			r.walk(e, p, ls)
		}
	}
}

// Hides reports that the rules hide generated text of kind k, wherever
// the client API puts it, as its translator reports it: the "content"
// member rule hides all of it, as it hides chat's content and the
// Responses API's text events; "arguments" and "input" hide a tool
// call's arguments.
func (r Rules) Hides(k translate.TextKind) bool {
	return r.member("content") || k == translate.TextArguments && (r.member("arguments") || r.member("input"))
}

func (r Rules) member(k string) bool {
	for _, m := range r.Members {
		if strings.EqualFold(m, k) {
			return true
		}
	}
	return false
}

// eventMember reports a member of a Responses stream event of type typ
// that carries what a member rule names (see Rules.Members).
func (r Rules) eventMember(typ, k string) bool {
	if !slices.Contains(eventTextMembers, k) {
		return false
	}
	if k == "delta" {
		switch {
		case strings.Contains(typ, "arguments"):
			return r.member("arguments") || r.member("content")
		case strings.Contains(typ, "_input"):
			return r.member("input") || r.member("content")
		}
	}
	return r.member("content")
}

// redactLeaves hides what the rules find in each string, and in the
// strings at each path joined in order, and the spans of pre (by leaf).
func (r Rules) redactLeaves(ls []leaf, pre map[int][][2]int) {
	spans := make([][][2]int, len(ls))
	groups := map[string][]int{}
	for i := range ls {
		spans[i] = pre[i]
		r.find(ls[i].s, func(a, b int) { spans[i] = append(spans[i], [2]int{a, b}) })
		groups[ls[i].path] = append(groups[ls[i].path], i)
	}
	for _, idx := range groups {
		if len(idx) < 2 {
			continue
		}
		var sb strings.Builder
		starts := make([]int, len(idx))
		for j, i := range idx {
			starts[j] = sb.Len()
			sb.WriteString(ls[i].s)
		}
		r.find(sb.String(), func(a, b int) {
			j := sort.Search(len(starts), func(j int) bool { return starts[j] > a }) - 1
			for ; j < len(idx) && starts[j] < b; j++ {
				i := idx[j]
				if lo, hi := max(a-starts[j], 0), min(b-starts[j], len(ls[i].s)); hi > lo {
					spans[i] = append(spans[i], [2]int{lo, hi})
				}
			}
		})
	}
	for i := range ls {
		if len(spans[i]) > 0 {
			ls[i].set(hide(ls[i].s, spans[i]))
		}
	}
}

// find calls add with the byte range of every credential, secret and
// pattern match in s.
func (r Rules) find(s string, add func(a, b int)) {
	findSecrets(s, add)
	for _, sec := range r.Secrets {
		findExact(s, sec, add)
	}
	for _, p := range r.Patterns {
		for _, m := range p.FindAllStringIndex(s, -1) {
			if m[1] > m[0] {
				add(m[0], m[1])
			}
		}
	}
}

// findExact calls add with every occurrence of sec in s.
func findExact(s, sec string, add func(a, b int)) {
	if len(sec) < MinSecretLen {
		return
	}
	for i := 0; ; {
		j := strings.Index(s[i:], sec)
		if j < 0 {
			return
		}
		add(i+j, i+j+len(sec))
		i += j + 1
	}
}

// hide replaces the spans of s, merged where they touch, with Redacted.
func hide(s string, spans [][2]int) string {
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(x, y [2]int) int { return x[0] - y[0] })
	var b strings.Builder
	at := 0
	for i := 0; i < len(spans); {
		lo, hi := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= hi; i++ {
			hi = max(hi, spans[i][1])
		}
		b.WriteString(s[at:lo])
		b.WriteString(Redacted)
		at = hi
	}
	b.WriteString(s[at:])
	return b.String()
}

// text hides credentials and what the patterns match.
func (r Rules) text(s string) string {
	var spans [][2]int
	r.find(s, func(a, b int) { spans = append(spans, [2]int{a, b}) })
	return hide(s, spans)
}

// Scrub hides the credentials and secrets found in s, text as it will
// be kept (a redacted capture, a provider's error as the client gets it),
// JSON escapes and all: one whose start a backslash escape hides from
// the strings' pass (a "\n" before "npm_…") is hidden with the escape.
// Members and Patterns are not applied.
func (r Rules) Scrub(s string) string {
	var spans [][2]int
	add := func(a, b int) { spans = append(spans, [2]int{escapeStart(s, a), b}) }
	findSecrets(s, add)
	for _, sec := range r.Secrets {
		findExact(s, sec, add)
		if q, err := json.Marshal(sec); err == nil && string(q[1:len(q)-1]) != sec {
			findExact(s, string(q[1:len(q)-1]), add)
		}
	}
	return hide(s, spans)
}

// escapeStart moves a, a position in JSON text, back to the start of the
// backslash escape it is inside of, if any.
func escapeStart(s string, a int) int {
	for k := a - 1; k >= 0 && k >= a-5; k-- {
		if s[k] != '\\' {
			continue
		}
		n := 0 // the backslashes ending at k
		for j := k; j >= 0 && s[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 { // s[k] is itself escaped
			return a
		}
		if k == a-1 || (s[k+1] == 'u' && a <= k+5) {
			return k
		}
		return a
	}
	return a
}
