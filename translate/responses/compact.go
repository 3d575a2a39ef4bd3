package responses

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
)

// POST /v1/responses/compact shortens a conversation: its answer (a
// CompactResource) lists the conversation's user messages followed by one
// compaction item, whose encrypted_content stands for everything else and
// which the client sends back as input. OpenAI compacts natively
// (CompactPassthrough). Every other provider is asked, through its chat
// translator, for a summary of the conversation (CompactBridge); the
// gateway's compaction item carries that summary, and the bridge (and the
// passthrough, for a conversation that moves to OpenAI) replays it as a
// user message. It is opaque to the client, not encrypted: it is the
// client's own conversation, summarized.

// sealPrefix marks the gateway's compaction items, thinkingPrefix the
// encrypted_content of its reasoning items (thinking.go).
const (
	sealPrefix     = "modelgate.compaction.v1:"
	thinkingPrefix = "modelgate.thinking.v1:"
)

// compactionPrompt asks the model for the summary a compaction keeps.
const compactionPrompt = "You are performing a context checkpoint compaction. Summarize the conversation so far " +
	"for another model that will continue it without seeing it: the task and its goal, what has been done (decisions, " +
	"files and commands, tool results that matter), what remains, and the constraints and preferences the user stated. " +
	"Be complete and concise; write only the summary."

// summaryIntro introduces a replayed summary to the model.
const summaryIntro = "Summary of the earlier conversation, which was compacted:\n\n"

// seal is the encrypted_content of the gateway's compaction item.
func seal(summary string) string {
	return sealPrefix + base64.RawURLEncoding.EncodeToString([]byte(summary))
}

// unseal is the summary of the gateway's compaction item, false for
// another's (OpenAI's, which only OpenAI can read).
func unseal(content string) (string, bool) {
	rest, ok := strings.CutPrefix(content, sealPrefix)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	return string(b), err == nil
}

// withSummaries replaces the gateway's compaction items in items with the
// user messages they replay as, and reports whether there were any.
func withSummaries(items []json.RawMessage) ([]json.RawMessage, bool) {
	var out []json.RawMessage // items, copied at the first replacement
	for i, raw := range items {
		if msg, ok := summaryMessage(raw); ok {
			if out == nil {
				out = slices.Clone(items)
			}
			out[i] = msg
		}
	}
	if out == nil {
		return items, false
	}
	return out, true
}

// summaryMessage is the user message a compaction item of the gateway's
// replays as; false for an item that is none.
func summaryMessage(raw json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(raw, []byte(sealPrefix)) {
		return nil, false
	}
	var it struct {
		Type             string `json:"type"`
		EncryptedContent string `json:"encrypted_content"`
	}
	if json.Unmarshal(raw, &it) != nil || it.Type != "compaction" {
		return nil, false
	}
	summary, ok := unseal(it.EncryptedContent)
	if !ok {
		return nil, false
	}
	b, _ := json.Marshal(map[string]any{"type": "message", "role": "user",
		"content": []map[string]string{{"type": "input_text", "text": summaryIntro + summary}}})
	return b, true
}

// CompactBridge compacts a conversation on a provider without the
// endpoint: its chat translator is asked for a summary.
type CompactBridge struct {
	translate.NoText // generates no text
	chat             translate.Translator
	kept             []json.RawMessage // the conversation's user messages
	id               string
	created          int64
	head             translate.Head
}

// NewCompactBridge builds the chat request of r's compaction (history is
// the stored conversation it continues) and the translator that turns the
// chat answer into the CompactResource named id.
func NewCompactBridge(newChat func(*api.ChatRequest) translate.Translator, r *Request, history []json.RawMessage, id string, created int64) (*CompactBridge, error) {
	input, err := r.Items()
	if err != nil {
		return nil, &api.RequestError{Param: "input", Code: "invalid_type", Message: "Invalid 'input'."}
	}
	conversation := append(append([]json.RawMessage(nil), history...), input...)
	ask, _ := json.Marshal(map[string]string{"type": "message", "role": "user", "content": compactionPrompt})
	members := make(map[string]json.RawMessage, len(r.Members))
	for _, k := range []string{"model", "instructions", "user"} {
		if v, ok := r.Members[k]; ok {
			members[k] = v
		}
	}
	members["input"], _ = json.Marshal(append(conversation, ask))
	chatReq, err := ToChat(&Request{Model: r.Model, Members: members}, nil)
	if err != nil {
		return nil, err
	}
	return &CompactBridge{chat: newChat(chatReq), kept: userMessages(conversation), id: id, created: created}, nil
}

// userMessages are the conversation's user messages, which a compaction
// keeps as they are; a string input is one.
func userMessages(items []json.RawMessage) []json.RawMessage {
	out := []json.RawMessage{}
	for _, raw := range items {
		var it struct{ Type, Role string }
		if json.Unmarshal(raw, &it) == nil && (it.Type == "message" || it.Type == "") && it.Role == "user" {
			out = append(out, raw)
		}
	}
	return out
}

// keptMessage is a user message as a compacted response lists it: a
// Message item, with an id (id when it has none), a status and its
// content as parts.
func keptMessage(raw json.RawMessage, id string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	m["type"] = json.RawMessage(`"message"`)
	if isNull(m["id"]) {
		m["id"] = mustJSON(id)
	}
	if isNull(m["status"]) {
		m["status"] = json.RawMessage(`"completed"`)
	}
	var text string
	if json.Unmarshal(m["content"], &text) == nil {
		m["content"] = mustJSON([]map[string]string{{"type": "input_text", "text": text}})
	}
	return mustJSON(m)
}

// RequestBody implements translate.Translator.
func (b *CompactBridge) RequestBody() (translate.Upstream, error) {
	up, err := b.chat.RequestBody()
	return up, responsesError(err)
}

// MaxOutputTokens implements translate.OutputBound for the chat
// translator inside.
func (b *CompactBridge) MaxOutputTokens() int64 { return translate.MaxOutputTokens(b.chat) }

// ResponseHeaders implements translate.Translator.
func (b *CompactBridge) ResponseHeaders(status int, contentType string) translate.Head {
	b.head = b.chat.ResponseHeaders(status, contentType)
	return b.head
}

// ResponseBody implements translate.Translator: the CompactResource of
// the chat completion, an error wrapping translate.ErrUpstream for one
// without a summary.
func (b *CompactBridge) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := b.chat.ResponseBody(chunk, endOfStream)
	if err != nil || b.head.Status/100 != 2 || !endOfStream {
		return out, err
	}
	var c api.ChatCompletion
	if err := json.Unmarshal(out, &c); err != nil {
		return nil, api.AsUnusable(err)
	}
	if len(c.Choices) == 0 || c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content == "" {
		return nil, api.Unusable("the provider's answer has no summary")
	}
	output := make([]json.RawMessage, 0, len(b.kept)+1)
	for i, m := range b.kept {
		output = append(output, keptMessage(m, outputID("msg_", b.id, i)))
	}
	output = append(output, mustJSON(map[string]string{"type": "compaction", "id": outputID("cmp_", b.id, -1),
		"encrypted_content": seal(*c.Choices[0].Message.Content)}))
	return json.Marshal(map[string]any{"id": b.id, "object": "response.compaction", "created_at": b.created,
		"output": output, "usage": responsesUsage(c.Usage, 0)})
}

// Usage implements translate.Translator.
func (b *CompactBridge) Usage() translate.Usage { return b.chat.Usage() }

// CompactPassthrough sends a compaction to OpenAI as the client asked
// for it, with the stored conversation inlined in place of
// previous_response_id, and relays its answer.
type CompactPassthrough struct {
	Passthrough
	none translate.Output // a compaction generates no text: its summary is sealed
}

// NewCompactPassthrough returns the translator of r's compaction on
// provider openai.
func NewCompactPassthrough(t translate.Target, r *Request, history []json.RawMessage) *CompactPassthrough {
	return &CompactPassthrough{Passthrough: Passthrough{target: t, req: r, history: history}}
}

// RequestBody implements translate.Translator.
func (p *CompactPassthrough) RequestBody() (translate.Upstream, error) {
	up, err := p.Passthrough.RequestBody()
	up.Path = p.target.BasePath + "/v1/responses/compact"
	return up, err
}

// ResponseBody implements translate.Translator: OpenAI's CompactResource
// with its usage read, an error wrapping translate.ErrUpstream for a body
// that is none.
func (p *CompactPassthrough) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if !endOfStream {
		return nil, nil
	}
	if p.head.Status/100 != 2 {
		return api.ProviderError(p.head.Status, chunk), nil
	}
	var m map[string]json.RawMessage
	if err := api.DecodeUpstream(chunk, &m, "compacted response"); err != nil {
		return nil, err
	}
	var output []json.RawMessage
	if json.Unmarshal(m["output"], &output) != nil || !api.ObjectArray(m["output"]) {
		return nil, api.Unusable("the provider's compacted response has no output array of items")
	}
	var id string
	json.Unmarshal(m["id"], &id) //nolint:errcheck // no id names the messages by position alone
	for i, it := range output {
		var item struct{ Type string }
		if json.Unmarshal(it, &item) == nil && item.Type == "message" {
			output[i] = keptMessage(it, outputID("msg_", id, i))
		}
	}
	m["output"], _ = api.Marshal(output)
	if u, ok := m["usage"]; ok && !isNull(u) {
		m["usage"] = p.readUsage(u)
	}
	return api.Marshal(m)
}

var _ translate.Reporter = (*CompactBridge)(nil)

// Output implements translate.Reporter: empty.
func (p *CompactPassthrough) Output() *translate.Output { return &p.none }

var _ translate.Reporter = (*CompactPassthrough)(nil)
