package api

import (
	"encoding/json"
	"slices"
	"strings"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
)

// The writers of the client's text, for rules that mask it: each calls
// f with the pieces its reader (texts.go) returns, in the same order,
// and puts the text f returns for a piece in place of the piece's JSON
// string, quoted as encoding/json quotes it. Everything else of the
// request stays as sent, byte for byte; a request f changes nothing of is
// left as it was.

// MapChatTexts calls f with each piece of r's text, as ChatTexts returns
// them, and puts the text f returns in the piece's place. It reports
// whether anything changed: then r's messages member, its Body and
// ModelAt and OptionsAt (the offsets of Body's members) are edited to
// match.
func MapChatTexts(r *ChatRequest, f func(translate.RequestText) string) bool {
	msgs := mapMessages(r.Members["messages"], func(role string, content json.RawMessage) json.RawMessage {
		return MapTexts(content, RolePart(role), f, "text")
	})
	if msgs == nil {
		return false
	}
	r.Body = setMember(r.Members, r.Body, "messages", msgs)
	if r.Body != nil {
		r.ModelAt, r.OptionsAt = memberAt(r.Body, "model"), memberAt(r.Body, "stream_options")
	}
	return true
}

// MapMessagesTexts calls f with each piece of r's text, as MessagesTexts
// returns them, and puts the text f returns in the piece's place. It
// reports whether anything changed: then r's system and messages members,
// its Body and ModelAt are edited to match.
func MapMessagesTexts(r *MessagesRequest, f func(translate.RequestText) string) bool {
	system := MapTexts(r.Members["system"], translate.PartSystem, f, "text")
	msgs := mapMessages(r.Members["messages"], func(role string, content json.RawMessage) json.RawMessage {
		return mapBlocks(content, turnPart(role), f)
	})
	changed := false
	for _, m := range []struct {
		name  string
		value json.RawMessage
	}{{"system", system}, {"messages", msgs}} {
		if m.value != nil {
			r.Body, changed = setMember(r.Members, r.Body, m.name, m.value), true
		}
	}
	if changed && r.ModelAt.End > 0 {
		r.ModelAt = memberAt(r.Body, "model")
	}
	return changed
}

// mapMessages is the messages array raw with the content of each message
// replaced by what content returns for it (nil: as it is); nil when
// nothing changed.
func mapMessages(raw json.RawMessage, content func(role string, content json.RawMessage) json.RawMessage) json.RawMessage {
	var msgs []message
	if json.Unmarshal(raw, &msgs) != nil {
		return nil
	}
	return MapElements(raw, func(i int, m json.RawMessage) json.RawMessage {
		return MapField(m, "content", content(msgs[i].Role, msgs[i].Content))
	})
}

// mapBlocks is MapTexts of a Messages API turn's content: its text
// blocks and its tool_result blocks' content.
func mapBlocks(content json.RawMessage, part translate.Part, f func(translate.RequestText) string) json.RawMessage {
	var blocks []contentBlock
	if json.Unmarshal(content, &blocks) != nil {
		return MapTexts(content, part, f, "text") // a string
	}
	return MapElements(content, func(i int, b json.RawMessage) json.RawMessage {
		switch blocks[i].Type {
		case "text":
			return MapField(b, "text", mapText(part, blocks[i].Text, f))
		case "tool_result":
			return MapField(b, "content", MapTexts(blocks[i].Content, translate.PartToolResult, f, "text"))
		}
		return nil
	})
}

// MapTexts is the writer of AppendTexts: it calls f with each piece of
// content's text AppendTexts would append, in order, and returns content
// with the text f returns in each piece's place; nil when f changed
// none.
func MapTexts(content json.RawMessage, part translate.Part, f func(translate.RequestText) string, types ...string) json.RawMessage {
	if len(content) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return mapText(part, s, f)
	}
	var parts []contentPart
	if json.Unmarshal(content, &parts) != nil {
		return nil
	}
	return MapElements(content, func(i int, p json.RawMessage) json.RawMessage {
		if !slices.Contains(types, parts[i].Type) {
			return nil
		}
		return MapField(p, "text", mapText(part, parts[i].Text, f))
	})
}

// mapText is the writer of appendText: the JSON string of the text f
// returns for s, nil when s is no piece (empty) or f returns it as it is.
func mapText(part translate.Part, s string, f func(translate.RequestText) string) json.RawMessage {
	if s == "" {
		return nil
	}
	if t := f(translate.RequestText{Part: part, Text: s}); t != s {
		return jsonscan.AppendQuoted(nil, t)
	}
	return nil
}

// MapElements is the JSON array raw with each element for which f
// returns a value (given the element's index and text) replaced by that
// value, and the rest of raw as it is; nil when f returns none or raw is
// no array.
func MapElements(raw json.RawMessage, f func(i int, elem json.RawMessage) json.RawMessage) json.RawMessage {
	it, ok := jsonscan.Entries(raw, jsonscan.SkipSpace(raw, 0))
	if !ok || it.Object {
		return nil
	}
	var out []byte
	done := 0 // raw[:done] is in out
	for i := 0; ; i++ {
		e, more := it.Next()
		if !more {
			break
		}
		if v := f(i, e.Value); v != nil {
			out = append(append(out, raw[done:e.VS]...), v...)
			done = e.VS + len(e.Value)
		}
	}
	if out == nil {
		return nil
	}
	return append(out, raw[done:]...)
}

// MapField is the JSON object obj with v as the value of the member
// encoding/json decodes into a struct field named name: the last one
// whose key means name without regard to case and whose value is not
// null (which decodes into a string as nothing). obj must have one, as it
// has when v is made from the field's decoded value. MapField of a nil v
// is nil, so that a writer that changed nothing changes nothing.
func MapField(obj json.RawMessage, name string, v json.RawMessage) json.RawMessage {
	if v == nil {
		return nil
	}
	var at jsonscan.Member
	it, _ := jsonscan.Entries(obj, jsonscan.SkipSpace(obj, 0))
	for {
		m, more := it.Next()
		if !more {
			break
		}
		if !jsonscan.IsNull(m.Value) && strings.EqualFold(memberName(m), name) {
			at = m
		}
	}
	return splice(obj, at, v)
}

// setMember puts v as the value of a request's member name: in members,
// and in body, the request as sent (where nil stays nil), at the last
// member of that name, the one members holds. It returns the edited
// body.
func setMember(members map[string]json.RawMessage, body []byte, name string, v json.RawMessage) []byte {
	members[name] = v
	if body == nil {
		return nil
	}
	return splice(body, memberAt(body, name), v)
}

// memberAt is the last top-level member of obj named name; its End is
// zero when there is none.
func memberAt(obj []byte, name string) jsonscan.Member {
	var at jsonscan.Member
	members, _ := jsonscan.Members(obj, nil)
	for _, m := range members {
		if memberName(m) == name {
			at = m
		}
	}
	return at
}

// splice is a copy of doc with v in place of the value of m, one of its
// members.
func splice(doc []byte, m jsonscan.Member, v []byte) []byte {
	out := make([]byte, 0, len(doc)-len(m.Value)+len(v))
	out = append(append(out, doc[:m.VS]...), v...)
	return append(out, doc[m.VS+len(m.Value):]...)
}
