package api

import (
	"encoding/json"
	"slices"
	"strconv"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
)

// The chat completion objects every translator answers with: one set of
// types, so that a client gets the same shape whatever the provider.

// ChatCompletion is a chat.completion (CreateChatCompletionResponse).
type ChatCompletion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage"`
}

// NewChatCompletion starts a chat.completion with its one choice's
// assistant message.
func NewChatCompletion(id, model string, created int64) ChatCompletion {
	return ChatCompletion{ID: id, Object: "chat.completion", Created: created, Model: model,
		Choices: []Choice{{Message: Message{Role: "assistant"}}}}
}

// Choice is one choice of a chat.completion.
type Choice struct {
	Index        int       `json:"index"`
	Message      Message   `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

// Message is the assistant's message of a choice. Content and Refusal are
// null when absent; ReasoningContent is the reasoning text of providers
// that return it, under the name DeepSeek and vLLM give it.
type Message struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	Refusal          *string    `json:"refusal"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// ThinkingBlocks are the provider's thinking as it must be sent back
	// (ThinkingBlock); absent where it has none to send back.
	ThinkingBlocks []ThinkingBlock `json:"thinking_blocks,omitempty"`
	// Annotations cite the web pages a web search found, by the span of
	// Content they support.
	Annotations []Annotation `json:"annotations,omitempty"`
}

// Annotation is a url_citation annotation: StartIndex and EndIndex count
// Unicode code points of the message content.
type Annotation struct {
	Type        string `json:"type"`
	URLCitation struct {
		StartIndex int    `json:"start_index"`
		EndIndex   int    `json:"end_index"`
		URL        string `json:"url"`
		Title      string `json:"title"`
	} `json:"url_citation"`
}

// URLCitation is the annotation citing url (titled title) for content's
// code points start to end.
func URLCitation(start, end int, url, title string) Annotation {
	a := Annotation{Type: "url_citation"}
	a.URLCitation.StartIndex, a.URLCitation.EndIndex, a.URLCitation.URL, a.URLCitation.Title = start, end, url, title
	return a
}

// ThinkingBlock is a block of a model's thinking with what the provider
// needs to take it back on the next turn: Anthropic (and Claude on
// Vertex AI and Bedrock) requires the thinking of the assistant turn a
// tool loop continues, unchanged with its signature. A chat client sends
// it back in the assistant message's thinking_blocks, as it got it in the
// completion's message (a stream delivers each block whole, in a delta,
// when the block ends); the gateway never makes one up.
type ThinkingBlock struct {
	// Type is "thinking" or "redacted_thinking".
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Data is a redacted block's encrypted thinking.
	Data string `json:"data,omitempty"`
}

// ToolCall is a function tool call, whole in a message or in pieces in
// stream deltas: there Index says which call a piece continues, and the
// pieces after the first carry only arguments.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function and (part of) its JSON arguments.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// NewToolCall is a whole function tool call, as in a message or in the
// one delta of a provider that streams calls whole; index is nil in a
// message.
func NewToolCall(index *int, id, name, arguments string) ToolCall {
	return ToolCall{Index: index, ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: arguments}}
}

// ChatCompletionChunk is a chat.completion.chunk
// (CreateChatCompletionStreamResponse).
type ChatCompletionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
}

// NewChunk starts a chat.completion.chunk without choices.
func NewChunk(id, model string, created int64) ChatCompletionChunk {
	return ChatCompletionChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []ChunkChoice{}}
}

// ChunkChoice is the one choice of a chunk; FinishReason is null until the
// last content chunk.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is what a chunk adds to the message. Refusal is a piece of the
// message's refusal, which OpenAI streams apart from the content.
type Delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	ThinkingBlocks   []ThinkingBlock `json:"thinking_blocks,omitempty"`
}

// Usage is the usage of a chat completion (CompletionUsage), in the one
// shape every provider's answer has: OpenAI's, with both details objects
// and all their counts, zero where the provider reports none.
type Usage struct {
	PromptTokens            int64                   `json:"prompt_tokens"`
	CompletionTokens        int64                   `json:"completion_tokens"`
	TotalTokens             int64                   `json:"total_tokens"`
	PromptTokensDetails     PromptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails CompletionTokensDetails `json:"completion_tokens_details"`
}

// PromptTokensDetails breaks down the prompt tokens.
type PromptTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
	AudioTokens  int64 `json:"audio_tokens"`
}

// CompletionTokensDetails breaks down the completion tokens.
type CompletionTokensDetails struct {
	ReasoningTokens          int64 `json:"reasoning_tokens"`
	AudioTokens              int64 `json:"audio_tokens"`
	AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
}

// AppendJSON appends u as json.Marshal writes it, without reflection: the
// usage of every buffered answer and stream is written with it.
func (u *Usage) AppendJSON(dst []byte) []byte {
	dst = slices.Grow(dst, 320) // the names and nine int64 at most
	for _, f := range [...]struct {
		name string
		v    int64
	}{
		{`{"prompt_tokens":`, u.PromptTokens},
		{`,"completion_tokens":`, u.CompletionTokens},
		{`,"total_tokens":`, u.TotalTokens},
		{`,"prompt_tokens_details":{"cached_tokens":`, u.PromptTokensDetails.CachedTokens},
		{`,"audio_tokens":`, u.PromptTokensDetails.AudioTokens},
		{`},"completion_tokens_details":{"reasoning_tokens":`, u.CompletionTokensDetails.ReasoningTokens},
		{`,"audio_tokens":`, u.CompletionTokensDetails.AudioTokens},
		{`,"accepted_prediction_tokens":`, u.CompletionTokensDetails.AcceptedPredictionTokens},
		{`,"rejected_prediction_tokens":`, u.CompletionTokensDetails.RejectedPredictionTokens},
	} {
		dst = strconv.AppendInt(append(dst, f.name...), f.v, 10)
	}
	return append(dst, "}}"...)
}

// ChatUsage is the client's usage object for a normalized usage.
func ChatUsage(u translate.Usage) *Usage {
	return &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		PromptTokensDetails:     PromptTokensDetails{CachedTokens: u.CachedTokens},
		CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: u.ReasoningTokens}}
}

// ParseUsage reads the CompletionUsage of a server that speaks the OpenAI
// API, whatever members it has or lacks; nulls count zero. It fails on
// counts that are not integers or details that are not objects.
// DeepSeek's prompt_cache_hit_tokens are the cached tokens when
// prompt_tokens_details has none.
func ParseUsage(raw []byte) (*Usage, error) {
	var u Usage
	if readUsage(raw, &u) {
		return &u, nil
	}
	var w struct {
		Usage
		PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	w.cacheHits(w.PromptCacheHitTokens)
	return &w.Usage, nil
}

// cacheHits takes a count of cached tokens given outside
// prompt_tokens_details (DeepSeek's prompt_cache_hit_tokens) when the
// details have none.
func (u *Usage) cacheHits(n int64) {
	if u.PromptTokensDetails.CachedTokens == 0 {
		u.PromptTokensDetails.CachedTokens = n
	}
}

// usageNames are Usage's members, DeepSeek's cache hits, and the details'
// members.
var (
	usageNames = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details",
		"prompt_cache_hit_tokens"}
	promptDetailNames     = []string{"cached_tokens", "audio_tokens"}
	completionDetailNames = []string{"reasoning_tokens", "audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens"}
)

// readUsage reads usage as encoding/json would, without reflection, when
// it is written the usual way (members named exactly, each once), with
// integer counts or null and detail objects or null. One pass of a
// jsonscan.Cursor reads and checks the usage (rather than a check, then
// a walk); the details it has checked are read with
// jsonscan.PlainMembers. It reports false, leaving the rest to
// encoding/json, for anything else.
func readUsage(raw []byte, u *Usage) bool {
	var prompt [2][]byte
	var completion [4][]byte
	pd, cd := &u.PromptTokensDetails, &u.CompletionTokensDetails
	var hits int64
	c := jsonscan.NewCursor(raw)
	var seen uint32
	for key, more := c.FirstKey(); more; key, more = c.NextKey() {
		i := slices.Index(usageNames, string(key))
		if i < 0 {
			c.SkipUnknown(key, usageNames)
			continue
		}
		c.Once(&seen, 1<<i)
		v := c.Skip()
		var ok bool
		switch i {
		case 0:
			ok = readCount(v, &u.PromptTokens)
		case 1:
			ok = readCount(v, &u.CompletionTokens)
		case 2:
			ok = readCount(v, &u.TotalTokens)
		case 3:
			ok = readCounts(v, promptDetailNames, prompt[:], &pd.CachedTokens, &pd.AudioTokens)
		case 4:
			ok = readCounts(v, completionDetailNames, completion[:], &cd.ReasoningTokens, &cd.AudioTokens,
				&cd.AcceptedPredictionTokens, &cd.RejectedPredictionTokens)
		case 5:
			ok = readCount(v, &hits)
		}
		if !ok {
			return false
		}
	}
	u.cacheHits(hits)
	return c.End()
}

// readCounts reads the counts of a details object (or null) into counts,
// in the order of names.
func readCounts(obj []byte, names []string, vals [][]byte, counts ...*int64) bool {
	if jsonscan.IsNull(obj) {
		return true
	}
	if !jsonscan.PlainMembers(obj, names, vals) {
		return false
	}
	for i, n := range counts {
		if !readCount(vals[i], n) {
			return false
		}
	}
	return true
}

// readCount sets *n to an integer count; null leaves it.
func readCount(v []byte, n *int64) bool {
	if jsonscan.IsNull(v) {
		return true
	}
	if !jsonscan.IsInt(v) {
		return false
	}
	i, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*n = i
	return true
}

// Counts is the normalized usage.
func (u *Usage) Counts() translate.Usage {
	return translate.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.PromptTokensDetails.CachedTokens, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}
}

// SetText sets the message's content and reasoning. Content is null only
// for a message of tool calls without text, as OpenAI answers.
func (m *Message) SetText(text, reasoning string) {
	if text != "" || len(m.ToolCalls) == 0 {
		m.Content = &text
	}
	m.ReasoningContent = reasoning
}

// DoneEvent ends every chat completion stream.
const DoneEvent = "data: [DONE]\n\n"

// ChunkWriter writes the chunks of one stream as SSE events; they share
// its id, model and creation time.
type ChunkWriter struct {
	ID, Model string
	Created   int64
}

// Chunk appends ch as an event, stamped with the stream's id, model and
// time.
func (w ChunkWriter) Chunk(out []byte, ch ChatCompletionChunk) []byte {
	ch.ID, ch.Object, ch.Created, ch.Model = w.ID, "chat.completion.chunk", w.Created, w.Model
	if ch.Choices == nil {
		ch.Choices = []ChunkChoice{}
	}
	b, err := json.Marshal(ch)
	if err != nil { // cannot happen: strings and numbers only
		panic(err)
	}
	return sse.AppendData(out, b)
}

// Delta appends a chunk of the one choice: a delta and, on the last
// content chunk, its finish reason.
func (w ChunkWriter) Delta(out []byte, d Delta, finish *string) []byte {
	return w.Chunk(out, ChatCompletionChunk{Choices: []ChunkChoice{{Delta: d, FinishReason: finish}}})
}

// Usage appends the usage chunk stream_options.include_usage asks for:
// no choices, and the usage of the whole exchange.
func (w ChunkWriter) Usage(out []byte, u translate.Usage) []byte {
	return w.Chunk(out, ChatCompletionChunk{Usage: ChatUsage(u)})
}
