package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
)

// completion makes a CreateChatCompletionResponse valid and reads usage.
// Real providers send what the schema forbids: a top-level null (OpenAI's
// "system_fingerprint": null is typed string-only) and choices without
// required members; see choices. A body that is no chat completion (not
// a JSON object, or without choices) is an error wrapping
// translate.ErrUpstream.
//
// Like the stream's chunks (chunkFix), the body is edited in place: a
// valid answer costs one scan, and keeps the provider's member order and
// formatting.
func (c *chat) completion(body []byte) ([]byte, error) {
	doc := jsonscan.TrimSpace(body)
	switch {
	case len(doc) == 0:
		return nil, api.Unusable("the provider's chat completion is empty")
	case doc[0] != '{':
		return nil, api.Unusable("the provider's chat completion is not a JSON object")
	}
	var scratch [16]jsonscan.Member
	members, ok := jsonscan.ValidMembers(doc, scratch[:0])
	if !ok && json.Valid(doc) { // the deep nesting ValidMembers refuses
		members, ok = jsonscan.Members(doc, scratch[:0])
	}
	if !ok {
		var v json.RawMessage
		err := json.Unmarshal(doc, &v)
		return nil, fmt.Errorf("the provider's chat completion does not decode: %w: %w", translate.ErrUpstream, err)
	}
	f := &c.fix
	f.reset(doc, c.quirks.ContentParts, c.compatible)
	d := newDropper()
	hasChoices := false
	for _, m := range members {
		switch {
		case jsonscan.IsNull(m.Value), foreignServiceTier(m), f.foreign(m, answerMembers):
			f.drop(&d, m)
			continue
		case string(name(m.Key)) == "choices":
			hasChoices = true
			if err := completionChoices(f, m); err != nil {
				return nil, err
			}
		case string(name(m.Key)) == "model":
			f.echoModel(m)
		case string(name(m.Key)) == "usage":
			u, err := api.ParseUsage(m.Value)
			if err != nil {
				return nil, api.Unusable("the provider's usage is not a CompletionUsage")
			}
			c.usage = u.Counts()
			var buf [320]byte
			if usage := u.AppendJSON(buf[:0]); !bytes.Equal(usage, m.Value) {
				f.replace(m, bytes.Clone(usage))
			}
		}
		f.keep(&d, m)
	}
	f.close(&d)
	if !hasChoices {
		return nil, api.Unusable("the provider's chat completion has no choices")
	}
	if len(f.edits) == 0 && len(doc) == len(body) {
		return body, nil // nothing to change: the caller may keep it as it came
	}
	return f.apply(make([]byte, 0, len(doc)+64*len(f.edits))), nil
}

// finishReasons are the finish reasons of OpenAI's schema.
var finishReasons = []string{`"stop"`, `"length"`, `"tool_calls"`, `"content_filter"`, `"function_call"`}

// finishReason is the schema's finish reason for a server's (a JSON
// string or null), and whether it was one already. Servers of the family
// have their own: Mistral's model_length (the model's context is full)
// and DeepSeek's insufficient_system_resource (the answer was cut short)
// are length; any other (Mistral's error, vLLM's abort) is stop.
func finishReason(raw []byte) ([]byte, bool) {
	if jsonscan.IsNull(raw) || slices.Contains(finishReasons, string(raw)) || jsonscan.Kind(raw) != jsonscan.String {
		return raw, true
	}
	switch string(raw) {
	case `"model_length"`, `"insufficient_system_resource"`:
		return []byte(`"length"`), false
	}
	return []byte(`"stop"`), false
}

// serviceTiers are the service_tier values OpenAI's schema allows.
var serviceTiers = []string{`"auto"`, `"default"`, `"flex"`, `"scale"`, `"priority"`}

// foreignServiceTier reports a service_tier member whose value OpenAI's
// schema does not allow (Groq's "on_demand"): it goes, as a client's SDK
// may refuse an enum value it does not know.
func foreignServiceTier(m jsonscan.Member) bool {
	return string(name(m.Key)) == "service_tier" && !slices.Contains(serviceTiers, string(m.Value))
}

// completionChoices adds the members the schema requires that providers
// leave out (logprobs; the message's content and refusal; the type of its
// tool calls, see toolCallTypes) and drops message members that are null
// where the schema allows no null (Mistral's "tool_calls": null). Choices
// must be objects, and a message an object or null.
func completionChoices(f *chunkFix, choices jsonscan.Member) error {
	it, ok := jsonscan.Entries(f.doc, choices.VS)
	if !ok || it.Object {
		return api.Unusable("the provider's choices are not an array of objects")
	}
	for {
		ch, more := it.Next()
		if !more {
			return nil
		}
		switch jsonscan.Kind(ch.Value) {
		case jsonscan.Object:
		case jsonscan.Null:
			return api.Unusable("the provider sent a choice that is not an object")
		default:
			return api.Unusable("the provider's choices are not an array of objects")
		}
		var msg jsonscan.Member
		hasLogprobs, hasMsg := false, false
		members, _ := jsonscan.Entries(f.doc, ch.VS)
		last := -1
		d := newDropper()
		for {
			m, more := members.Next()
			if !more {
				break
			}
			if f.foreign(m, choiceMembers) {
				f.drop(&d, m)
				continue
			}
			f.keep(&d, m)
			last = m.End
			switch string(name(m.Key)) {
			case "logprobs":
				hasLogprobs = true
			case "message":
				msg, hasMsg = m, true
			case "finish_reason":
				if r, ok := finishReason(m.Value); !ok {
					f.replace(m, r)
				}
			}
		}
		f.close(&d)
		if hasMsg && !jsonscan.IsNull(msg.Value) {
			if jsonscan.Kind(msg.Value) != jsonscan.Object {
				return api.Unusable("the provider sent a choice whose message is not an object")
			}
			if err := completionMessage(f, msg); err != nil {
				return err
			}
		}
		if !hasLogprobs {
			f.insert(ch.VS, last, `"logprobs":null`)
		}
	}
}

// insert adds member (key and value) to the object at doc[open] whose last
// member ends at last (-1 for an empty object).
func (f *chunkFix) insert(open, last int, member string) {
	if last < 0 {
		f.edits = append(f.edits, edit{Start: open + 1, End: open + 1, repl: []byte(member)})
		return
	}
	f.edits = append(f.edits, edit{Start: last, End: last, repl: []byte("," + member)})
}

// completionMessage drops the message's null members but content and
// refusal, which it adds when absent, keeps only the annotations OpenAI's
// schema has (urlCitations), and types its tool calls. Content
// as typed parts (Mistral's thinking answers, Quirks.ContentParts) becomes
// its text, the thinking reasoning_content, as in streams.
func completionMessage(f *chunkFix, msg jsonscan.Member) error {
	it, _ := jsonscan.Entries(f.doc, msg.VS)
	d := newDropper()
	hasContent, hasRefusal, hasReasoning := false, false, false
	var calls, content, reasoning jsonscan.Member
	hasCalls := false
	last := -1
	for {
		m, more := it.Next()
		if !more {
			break
		}
		key := string(name(m.Key))
		switch key {
		case "content":
			hasContent, content = true, m
		case "reasoning_content":
			hasReasoning, reasoning = jsonscan.Kind(m.Value) == jsonscan.String, m
		case "refusal":
			hasRefusal = true
		case "tool_calls":
			calls, hasCalls = m, !jsonscan.IsNull(m.Value)
		}
		if jsonscan.IsNull(m.Value) && key != "content" && key != "refusal" {
			f.drop(&d, m)
			continue
		}
		f.keep(&d, m)
		if key == "annotations" {
			urlCitations(f, m)
		}
		last = m.End
	}
	f.close(&d)
	if hasContent && f.parts && jsonscan.Kind(content.Value) == jsonscan.Array {
		f.flatten(content, reasoning, hasReasoning)
	}
	var add []string
	if !hasContent {
		add = append(add, `"content":null`)
	}
	if !hasRefusal {
		add = append(add, `"refusal":null`)
	}
	if add != nil {
		f.insert(msg.VS, last, strings.Join(add, ","))
	}
	if hasCalls {
		return toolCallTypes(f, calls)
	}
	return nil
}

// toolCallTypes gives a message's tool calls the type OpenAI requires
// where a provider leaves it out or null (Mistral): "function", or
// "custom" for a custom tool's call (one with a custom and no function
// member). Tool calls must be an array; entries that are not objects are
// left as sent.
func toolCallTypes(f *chunkFix, calls jsonscan.Member) error {
	it, ok := jsonscan.Entries(f.doc, calls.VS)
	if !ok || it.Object {
		return api.Unusable("the provider's message tool_calls are not an array")
	}
	for {
		call, more := it.Next()
		if !more {
			return nil
		}
		if jsonscan.Kind(call.Value) != jsonscan.Object {
			continue
		}
		members, _ := jsonscan.Entries(f.doc, call.VS)
		var typ jsonscan.Member
		hasType, hasFunction, hasCustom := false, false, false
		last := -1
		for {
			m, more := members.Next()
			if !more {
				break
			}
			last = m.End
			switch string(name(m.Key)) {
			case "type":
				typ, hasType = m, true
			case "function":
				hasFunction = true
			case "custom":
				hasCustom = true
			}
		}
		if hasType && !jsonscan.IsNull(typ.Value) {
			continue
		}
		value := `"function"`
		if !hasFunction && hasCustom {
			value = `"custom"`
		}
		if hasType {
			f.replace(typ, []byte(value))
		} else {
			f.insert(call.VS, last, `"type":`+value)
		}
	}
}

// urlCitations keeps of a message's annotations the URL citations, the
// one kind OpenAI's schema has, each with its four members typed as the
// schema types them. Others (OpenRouter's file annotations, which carry
// the parsed text of a file the client sent) are dropped; annotations
// that are not an array become an empty one.
func urlCitations(f *chunkFix, m jsonscan.Member) {
	if v := jsonscan.TrimSpace(m.Value); len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']' && len(jsonscan.TrimSpace(v[1:len(v)-1])) == 0 {
		return // none: the common case, without encoding/json (and the deep call that grows a stream's stack)
	}
	var entries []json.RawMessage
	if json.Unmarshal(m.Value, &entries) != nil {
		f.replace(m, []byte("[]"))
		return
	}
	kept := make([]json.RawMessage, 0, len(entries))
	for _, e := range entries {
		var a struct {
			Type        string `json:"type"`
			URLCitation *struct {
				StartIndex *int64  `json:"start_index"`
				EndIndex   *int64  `json:"end_index"`
				URL        *string `json:"url"`
				Title      *string `json:"title"`
			} `json:"url_citation"`
		}
		if json.Unmarshal(e, &a) == nil && a.Type == "url_citation" && a.URLCitation != nil && a.URLCitation.StartIndex != nil &&
			a.URLCitation.EndIndex != nil && a.URLCitation.URL != nil && a.URLCitation.Title != nil {
			kept = append(kept, e)
		}
	}
	if len(kept) < len(entries) {
		b, _ := json.Marshal(kept)
		f.replace(m, b)
	}
}
