package openai

import (
	"bytes"
	"encoding/json"
	"slices"

	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
)

var doneEvent = []byte("data: [DONE]\n\n")

// StreamEventTooLarge is the client's error message when a provider's
// stream event exceeds the SSE decoder's limit (sse.ErrEventTooLarge).
const StreamEventTooLarge = "The provider sent a stream event larger than the gateway's limit."

// streamChunk emits the whole events a chunk completes. At the end it adds
// [DONE], or an error event when the upstream broke off: the OpenAI SDKs
// otherwise end such a stream silently, as if it were complete.
func (c *chat) streamChunk(chunk []byte, endOfStream bool) []byte {
	var out []byte
	for _, ev := range c.dec.Feed(chunk) {
		out = c.event(out, ev.Data)
	}
	if c.dec.Err() != nil && !c.done {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error", Message: StreamEventTooLarge}))
	}
	if !endOfStream {
		return out
	}
	if !c.done {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		out = sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider's stream ended before it was complete."}))
	}
	if c.sawDone {
		out = append(out, doneEvent...)
	}
	return out
}

// event translates one upstream event.
func (c *chat) event(out, data []byte) []byte {
	if c.done {
		return out // nothing after [DONE] or an error
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		c.done, c.sawDone = true, true
		return out
	}
	// Validity and the members in one pass; encoding/json for the deep
	// nesting the scanner refuses.
	members, ok := jsonscan.ValidMembers(data, c.members())
	if !ok && json.Valid(data) {
		members, ok = jsonscan.Members(data, members[:0])
	}
	if ok && bytes.IndexByte(data, '\n') >= 0 {
		// JSON a provider spread over several data: lines: chunk writes
		// the event itself, in place, so it must be one line (elsewhere
		// sse.AppendData splits such data over lines).
		var compact bytes.Buffer
		if json.Compact(&compact, data) == nil {
			data = compact.Bytes()
			members, ok = jsonscan.Members(data, members[:0])
		}
	}
	c.scratch = members[:0]
	if !ok {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider sent a stream event that is not a JSON object."}))
	}
	if errMember, found := find(members, "error"); found && !jsonscan.IsNull(errMember.Value) {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.NormalizeError(500, []byte(`{"error":`+string(errMember.Value)+`}`)))
	}
	return c.chunk(out, data, members)
}

func find(members []jsonscan.Member, key string) (jsonscan.Member, bool) {
	for _, m := range members {
		if string(name(m.Key)) == key {
			return m, true
		}
	}
	return jsonscan.Member{}, false
}

// chunk edits a CreateChatCompletionStreamResponse: checks and repairs it
// (see chunkFix), reads usage, hides it when the client did not ask for
// it, drops top-level nulls (OpenAI's "system_fingerprint": null is typed
// string-only) and adds the required choices when absent (as empty, like
// "choices": null). A chunk that cannot be repaired ends the stream with
// an error.
func (c *chat) chunk(out, data []byte, members []jsonscan.Member) []byte {
	f := &c.fix
	f.reset(data, c.quirks.ContentParts, c.compatible)
	var usage jsonscan.Member
	hasUsage, hasChoices, choicesEmpty := false, false, true // absent choices are none
	for _, m := range members {
		switch string(name(m.Key)) {
		case "choices":
			hasChoices = true
			choicesEmpty = f.choices(m)
		case "usage":
			if !jsonscan.IsNull(m.Value) {
				usage, hasUsage = m, true
				c.canonicalUsage(m)
			}
		default:
			f.top(m)
		}
	}
	if f.bad != "" {
		c.done = true
		c.usage.Partial = true // the provider's stream ended before its end: estimated
		return sse.AppendData(out, api.MarshalError(api.ErrorObject{Type: "server_error",
			Message: "The provider sent a stream chunk with an invalid " + f.bad + "."}))
	}
	if hasUsage {
		if !c.req.IncludeUsage && choicesEmpty {
			return out // the usage-only chunk the gateway asked for
		}
	}
	// A server that reports usage on its last content chunk (Mistral) has
	// it split off into OpenAI's separate usage chunk when asked for.
	split := hasUsage && c.req.IncludeUsage && !choicesEmpty
	keepUsage := c.req.IncludeUsage && !split
	d := newDropper()
	for _, m := range members {
		key := string(name(m.Key))
		// OpenAI sends "usage": null on each chunk for clients that asked.
		if key == "usage" && !keepUsage || jsonscan.IsNull(m.Value) && key != "choices" && key != "usage" || foreignServiceTier(m) ||
			f.foreign(m, answerMembers) {
			f.drop(&d, m)
		} else {
			f.keep(&d, m)
		}
	}
	f.close(&d)
	if !hasChoices { // required
		end := bytes.LastIndexByte(data, '}')
		repl := []byte(`,"choices":[]`)
		if !d.kept {
			repl = repl[1:]
		}
		f.edits = append(f.edits, edit{Start: end, End: end, repl: repl})
	}
	out = slices.Grow(out, len(data)+len("data: \n\n"))
	out = append(out, "data: "...)
	out = f.apply(out)
	out = append(out, "\n\n"...)
	if split {
		out = c.usageChunk(out, members, f.applyRange(nil, usage.VS, usage.End))
	}
	return out
}

// canonicalUsage reads a chunk's usage and replaces it with the one shape
// every provider's usage has (api.Usage); a usage of the wrong types fails
// the chunk. It runs once a stream.
func (c *chat) canonicalUsage(m jsonscan.Member) {
	u, err := api.ParseUsage(m.Value)
	if jsonscan.Kind(m.Value) != jsonscan.Object || err != nil {
		c.fix.fail("usage")
		return
	}
	c.usage = u.Counts()
	c.fix.replace(m, u.AppendJSON(nil))
}

// usageChunk appends {id, object, created, model, choices: [], usage},
// with the client's model.
func (c *chat) usageChunk(out []byte, members []jsonscan.Member, usage []byte) []byte {
	u := map[string]json.RawMessage{"choices": json.RawMessage("[]"), "usage": usage}
	for _, key := range []string{"id", "object", "created", "model"} {
		if m, ok := find(members, key); ok && !jsonscan.IsNull(m.Value) {
			u[key] = m.Value
		}
	}
	if _, ok := u["model"]; ok {
		u["model"] = c.fix.modelJSON()
	}
	b, err := json.Marshal(u)
	if err != nil {
		return out
	}
	return sse.AppendData(out, b)
}
