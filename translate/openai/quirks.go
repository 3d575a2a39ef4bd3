package openai

import (
	"encoding/json"

	"modelgate/translate"
	"modelgate/translate/api"
)

// Quirks are the ways an OpenAI-compatible server departs from OpenAI's
// API. They are data: one translator serves the whole family.
type Quirks struct {
	// MaxTokensName is where max_completion_tokens goes for servers that
	// only know max_tokens; empty keeps OpenAI's names.
	MaxTokensName string
	// DeveloperAsSystem sends developer messages with the system role.
	DeveloperAsSystem bool
	// NoStreamOptions leaves stream_options out: the server reports usage
	// on its own (on the last chunk) or rejects the member.
	NoStreamOptions bool
	// ContentParts means stream deltas may carry content as typed part
	// arrays, which are flattened to OpenAI's string content; from other
	// servers such content is an invalid chunk.
	ContentParts bool
	// Drop lists request members the server rejects.
	Drop []string
	// KeepsReasoningContent: the server takes an assistant message's
	// reasoning_content back (DeepSeek wants it in a tool loop with
	// thinking; servers of open models may); other servers refuse it and
	// get it removed. The gateway's own thinking_blocks go to none.
	KeepsReasoningContent bool
	// KeepsCacheControl: the server takes Anthropic's cache_control
	// markers on messages, parts and tools (OpenRouter passes them to
	// Anthropic); other servers refuse or ignore them (they cache
	// prefixes by themselves) and get them removed.
	KeepsCacheControl bool
	// Embeddings are the server's /v1/embeddings quirks.
	Embeddings EmbeddingsQuirks
	// NoEmbeddings and NoTranscription mark a server without
	// /v1/embeddings or /v1/audio/transcriptions: the gateway refuses
	// those requests for its models instead of forwarding them.
	NoEmbeddings, NoTranscription bool
	// TranscriptionFormats are the response_format values the server's
	// /v1/audio/transcriptions produces; nil means all of OpenAI's. For a
	// format the server lacks, the gateway asks for verbose_json (srt,
	// vtt) or json (text) and renders the client's format itself.
	TranscriptionFormats []string
}

// openaiOnly are OpenAI platform features other servers do not take.
func openaiOnly() []string {
	return []string{"store", "metadata", "service_tier", "modalities", "audio", "prediction", "web_search_options", "prompt_cache_key", "prompt_cache_retention"}
}

// CompatibleProviders returns the quirks of each OpenAI-compatible
// provider, by the provider name a backend is configured with.
//
// Null members the schema forbids (vLLM and others send "role": null or
// "tool_calls": null in deltas) need no quirk: they are dropped from every
// stream, OpenAI's too, as from buffered responses.
func CompatibleProviders() map[string]Quirks {
	return map[string]Quirks{
		"openai-compatible": {KeepsReasoningContent: true, KeepsCacheControl: true},
		"mistral":           {MaxTokensName: "max_tokens", DeveloperAsSystem: true, NoStreamOptions: true, ContentParts: true, Drop: openaiOnly(), Embeddings: mistralEmbeddings},
		"groq":              {Drop: append([]string{"logit_bias", "logprobs", "top_logprobs"}, openaiOnly()...), TranscriptionFormats: []string{"json", "text", "verbose_json"}, NoEmbeddings: true},
		"deepseek":          {MaxTokensName: "max_tokens", DeveloperAsSystem: true, Drop: openaiOnly(), NoEmbeddings: true, NoTranscription: true, KeepsReasoningContent: true},
		"xai":               {Drop: openaiOnly(), NoEmbeddings: true, NoTranscription: true},
		"together":          {MaxTokensName: "max_tokens", DeveloperAsSystem: true, Drop: openaiOnly(), KeepsReasoningContent: true},
		"fireworks":         {MaxTokensName: "max_tokens", DeveloperAsSystem: true, Drop: openaiOnly(), KeepsReasoningContent: true},
		"openrouter":        {KeepsReasoningContent: true, KeepsCacheControl: true},
		"vllm":              {DeveloperAsSystem: true, Drop: openaiOnly(), KeepsReasoningContent: true},
		"cerebras":          {DeveloperAsSystem: true, Drop: append([]string{"frequency_penalty", "presence_penalty", "logit_bias", "parallel_tool_calls"}, openaiOnly()...), NoEmbeddings: true, NoTranscription: true},
		"ollama":            {MaxTokensName: "max_tokens", DeveloperAsSystem: true, Drop: openaiOnly(), NoTranscription: true, KeepsReasoningContent: true},
	}
}

// NewCompatibleChat returns the chat translator constructor for a server
// with these quirks.
func NewCompatibleChat(q Quirks) func(translate.Target, *api.ChatRequest) translate.Translator {
	return func(t translate.Target, req *api.ChatRequest) translate.Translator {
		return &chat{target: t, req: req, quirks: q, compatible: true, fix: answerFix(req)}
	}
}

// applyQuirks edits the upstream request members.
// plainRequest reports a server that takes chat requests as OpenAI does.
func (q Quirks) plainRequest() bool {
	return q.MaxTokensName == "" && !q.DeveloperAsSystem && !q.NoStreamOptions && len(q.Drop) == 0
}

// strip is what the server must not get in messages and tools:
// thinking_blocks (the gateway's, for Claude's thinking) and, unless it
// keeps them, reasoning_content and cache_control markers. A client that
// sends each message back as it got it sends the first two, also to
// another provider than the one that answered (fallback, a change of
// model); cache markers are for Anthropic-shaped APIs.
func (q Quirks) strip() api.Strip {
	return api.Strip{ThinkingBlocks: true, ReasoningContent: !q.KeepsReasoningContent, CacheControl: !q.KeepsCacheControl}
}

// stripped reports whether the request's messages or tools may hold what
// the server must not get, or the request has a top-level cache_control
// (an automatic marker, as some clients send Anthropic) it must not get.
func (q Quirks) stripped(members map[string]json.RawMessage) bool {
	s := q.strip()
	_, marked := members["cache_control"]
	return s.In(members["messages"]) || s.In(members["tools"]) || s.CacheControl && marked
}

func (q Quirks) apply(members map[string]json.RawMessage) error {
	for _, name := range q.Drop {
		delete(members, name)
	}
	if q.stripped(members) {
		if err := q.dropStripped(members); err != nil {
			return err
		}
	}
	if q.NoStreamOptions {
		delete(members, "stream_options")
	}
	if v, ok := members["max_completion_tokens"]; ok && q.MaxTokensName != "" {
		delete(members, "max_completion_tokens")
		members[q.MaxTokensName] = v
	}
	if !q.DeveloperAsSystem || members["messages"] == nil {
		return nil
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(members["messages"], &msgs); err != nil {
		return err
	}
	for _, m := range msgs {
		if string(m["role"]) == `"developer"` {
			m["role"] = json.RawMessage(`"system"`)
		}
	}
	b, err := json.Marshal(msgs)
	members["messages"] = b
	return err
}

// dropStripped removes what strip names from the messages and tools.
func (q Quirks) dropStripped(members map[string]json.RawMessage) error {
	s := q.strip()
	if s.CacheControl {
		delete(members, "cache_control")
	}
	if tools, ok := members["tools"]; ok {
		members["tools"] = s.Tools(tools)
	}
	if !s.In(members["messages"]) {
		return nil
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(members["messages"], &msgs); err != nil {
		return err
	}
	s.Messages(msgs)
	b, err := json.Marshal(msgs)
	members["messages"] = b
	return err
}
