package openai

import (
	"encoding/json"
	"fmt"
	"mime"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
)

// chat translates chat completions for backends that speak the OpenAI API.
type chat struct {
	target  translate.Target
	req     *api.ChatRequest
	status  int
	stream  bool
	dec     sse.Decoder
	usage   translate.Usage
	done    bool // [DONE] or an error event was seen
	sawDone bool // [DONE] was seen: it is emitted last
	quirks  Quirks
	scratch []jsonscan.Member
	fix     chunkFix
}

// NewChat returns the chat translator for provider openai and
// openai-compatible backends.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	return &chat{target: t, req: req}
}

// RequestBody maps the public model to the upstream one and, for streams,
// asks for usage so the gateway can always account for it.
func (c *chat) RequestBody() (translate.Upstream, error) {
	members := make(map[string]json.RawMessage, len(c.req.Members)+1)
	for k, v := range c.req.Members {
		members[k] = v
	}
	model, err := json.Marshal(c.target.Model)
	if err != nil {
		return translate.Upstream{}, err
	}
	members["model"] = model
	if c.req.Stream {
		if members["stream_options"], err = withIncludeUsage(members["stream_options"]); err != nil {
			return translate.Upstream{}, err
		}
	}
	if err := c.quirks.apply(members); err != nil {
		return translate.Upstream{}, fmt.Errorf("applying provider quirks: %w", err)
	}
	body, err := json.Marshal(members)
	if err != nil {
		return translate.Upstream{}, fmt.Errorf("encoding upstream request: %w", err)
	}
	return upstream(c.target, "/v1/chat/completions", "application/json", body), nil
}

// upstream is a request to path under the target's base path, with the
// target's key as a bearer token.
func upstream(t translate.Target, path, contentType string, body []byte) translate.Upstream {
	up := translate.Upstream{Body: body, Path: t.BasePath + path, Headers: []translate.Header{{Name: "content-type", Value: contentType}}}
	if t.APIKey != "" {
		up.Headers = append(up.Headers, translate.Header{Name: "authorization", Value: "Bearer " + t.APIKey})
	}
	return up
}

func withIncludeUsage(raw json.RawMessage) (json.RawMessage, error) {
	opts := map[string]json.RawMessage{}
	if !jsonscan.IsNull(raw) {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, err
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	return json.Marshal(opts)
}

// ResponseHeaders streams only successful event streams.
func (c *chat) ResponseHeaders(status int, contentType string) translate.Head {
	c.status = status
	mt, _, _ := mime.ParseMediaType(contentType)
	if status >= 200 && status < 300 && mt == "text/event-stream" {
		c.stream = true
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	}
	return translate.Head{Status: api.ClientStatus(status), ContentType: "application/json"}
}

// ResponseBody translates the whole body, or one stream chunk.
func (c *chat) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if c.stream {
		return c.streamChunk(chunk, endOfStream), nil
	}
	if c.status < 200 || c.status >= 300 {
		return api.ProviderError(c.status, chunk), nil
	}
	return c.completion(chunk)
}

// completion makes a CreateChatCompletionResponse valid and reads usage.
// Real providers send what the schema forbids: a top-level null (OpenAI's
// "system_fingerprint": null is typed string-only) and choices without
// required members; see withRequiredChoiceMembers. A body that is no
// chat completion (not a JSON object, or without choices) is an error
// wrapping translate.ErrUpstream.
func (c *chat) completion(body []byte) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := api.DecodeUpstream(body, &members, "chat completion"); err != nil {
		return nil, err
	}
	for k, v := range members {
		if jsonscan.IsNull(v) {
			delete(members, k)
		}
	}
	choices, ok := members["choices"]
	if !ok {
		return nil, api.Unusable("the provider's chat completion has no choices")
	}
	fixed, err := withRequiredChoiceMembers(choices)
	if err != nil {
		return nil, err
	}
	members["choices"] = fixed
	if raw, ok := members["usage"]; ok {
		u, err := api.ParseUsage(raw)
		if err != nil {
			return nil, api.Unusable("the provider's usage is not a CompletionUsage")
		}
		c.usage = u.Counts()
		if members["usage"], err = json.Marshal(u); err != nil {
			return nil, api.AsUnusable(err)
		}
	}
	out, err := json.Marshal(members)
	return out, api.AsUnusable(err)
}

// withRequiredChoiceMembers adds the members the schema requires that
// providers leave out (logprobs; the message's content and refusal; the
// type of its tool calls, see withToolCallTypes) and drops message members
// that are null where the schema allows no null (Mistral's "tool_calls":
// null). Choices must be objects, and a message an object or null.
func withRequiredChoiceMembers(raw json.RawMessage) (json.RawMessage, error) {
	var choices []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &choices); err != nil || choices == nil {
		return nil, api.Unusable("the provider's choices are not an array of objects")
	}
	for _, ch := range choices {
		if ch == nil {
			return nil, api.Unusable("the provider sent a choice that is not an object")
		}
		setIfAbsent(ch, "logprobs")
		if jsonscan.IsNull(ch["message"]) {
			continue
		}
		var msg map[string]json.RawMessage
		if json.Unmarshal(ch["message"], &msg) != nil || msg == nil {
			return nil, api.Unusable("the provider sent a choice whose message is not an object")
		}
		for k, v := range msg {
			if jsonscan.IsNull(v) && k != "content" && k != "refusal" {
				delete(msg, k)
			}
		}
		setIfAbsent(msg, "content")
		setIfAbsent(msg, "refusal")
		if calls, ok := msg["tool_calls"]; ok {
			fixed, err := withToolCallTypes(calls)
			if err != nil {
				return nil, err
			}
			msg["tool_calls"] = fixed
		}
		b, err := json.Marshal(msg)
		if err != nil {
			return nil, api.AsUnusable(err)
		}
		ch["message"] = b
	}
	out, err := json.Marshal(choices)
	return out, api.AsUnusable(err)
}

// withToolCallTypes gives a message's tool calls the type OpenAI requires
// where a provider leaves it out or null (Mistral): "function", or "custom"
// for a custom tool's call (one with custom and no function member). Tool
// calls must be an array; entries that are not objects are left as sent.
func withToolCallTypes(raw json.RawMessage) (json.RawMessage, error) {
	var calls []json.RawMessage
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, api.Unusable("the provider's message tool_calls are not an array")
	}
	changed := false
	for i, c := range calls {
		var call map[string]json.RawMessage
		if jsonscan.Kind(jsonscan.TrimSpace(c)) != jsonscan.Object || json.Unmarshal(c, &call) != nil || !jsonscan.IsNull(call["type"]) {
			continue
		}
		call["type"] = json.RawMessage(`"function"`)
		if _, fn := call["function"]; !fn && call["custom"] != nil {
			call["type"] = json.RawMessage(`"custom"`)
		}
		b, err := json.Marshal(call)
		if err != nil {
			return nil, api.AsUnusable(err)
		}
		calls[i], changed = b, true
	}
	if !changed {
		return raw, nil
	}
	out, err := json.Marshal(calls)
	return out, api.AsUnusable(err)
}

func setIfAbsent(m map[string]json.RawMessage, key string) {
	if _, ok := m[key]; !ok {
		m[key] = json.RawMessage("null")
	}
}

// Usage implements translate.Translator.
func (c *chat) Usage() translate.Usage { return c.usage }
