package extproc

import (
	"bytes"
	"encoding/json"
	"strconv"

	"modelgate/translate"
	"modelgate/translate/jsonscan"
)

// Estimates stand in for the provider's usage where an exchange consumed
// tokens but the provider never reported them: a stream the client left, a
// provider that stalled or reset, a timeout. They are rough on purpose
// (four bytes of text a token, as OpenAI's own rule of thumb) and marked
// as estimated in the ledger.
const bytesPerToken = 4

// promptEstimate estimates the prompt tokens of a JSON request body: its
// bytes without the inline files (data: URLs of images, audio and PDFs),
// which providers count by other rules and which would make a one-image
// request reserve a day's budget.
func promptEstimate(body []byte) int64 {
	n := len(body)
	for rest := body; ; {
		i := bytes.Index(rest, []byte(`"data:`))
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			break
		}
		n -= end
		rest = rest[end+1:]
	}
	return tokensOf(n)
}

func tokensOf(n int) int64 { return int64((n + bytesPerToken - 1) / bytesPerToken) }

// maxOutputTokens is a request's own bound on its answer, from its
// members: OpenAI's max_completion_tokens or max_tokens, or the Responses
// API's max_output_tokens; zero when it sets none. The members are valid
// JSON, whose integers strconv reads as encoding/json would.
func maxOutputTokens(members map[string]json.RawMessage) int64 {
	for _, name := range []string{"max_completion_tokens", "max_tokens", "max_output_tokens"} {
		if raw, ok := members[name]; ok {
			if v, err := strconv.ParseInt(string(jsonscan.TrimSpace(raw)), 10, 64); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

// streamedText counts the text a client-facing stream carried: the string
// values of the members that hold generated text in chat completion chunks
// (content, reasoning_content, refusal, tool call arguments) and Responses
// events (delta). It is only an estimate's input, so JSON escapes count as
// the bytes they take.
func streamedText(out []byte) int {
	n := 0
	for rest := out; ; {
		i := bytes.Index(rest, []byte(`":"`)) // a member whose value is a string
		if i < 0 {
			return n
		}
		key := rest[:i]
		key = key[bytes.LastIndexByte(key, '"')+1:]
		rest = rest[i+3:]
		end := stringEnd(rest)
		if textMember(key) {
			n += end
		}
		rest = rest[min(end+1, len(rest)):]
	}
}

// textMember reports a member that holds generated text.
func textMember(key []byte) bool {
	switch string(key) {
	case "content", "reasoning_content", "refusal", "arguments", "delta":
		return true
	}
	return false
}

// stringEnd is the length of a JSON string's contents up to its closing
// quote (or the end of b).
func stringEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b)
}

// usageToCharge is the provider's usage when it reported its completion,
// else an estimate from what is known, reported as such; zero for an
// exchange never routed.
func (ex *exchange) usageToCharge() (u translate.Usage, estimated bool) {
	if ex.tr == nil {
		return translate.Usage{}, false
	}
	u = ex.tr.Usage()
	if !ex.needsEstimate(u) {
		return u, false
	}
	est := translate.Usage{
		PromptTokens:     max(u.PromptTokens, ex.prompt),
		CompletionTokens: max(u.CompletionTokens, tokensOf(ex.streamed)),
		CachedTokens:     u.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens,
		// Audio and images are not estimated: the provider's count, if
		// any, stands.
		AudioSeconds: u.AudioSeconds,
		Images:       u.Images,
	}
	est.TotalTokens = est.PromptTokens + est.CompletionTokens
	return est, true
}

// needsEstimate: an exchange the provider received and that did not end
// with a complete answer, or a complete success without any usage.
func (ex *exchange) needsEstimate(u translate.Usage) bool {
	switch {
	case !ex.sent:
		return false
	case ex.envoyReply != nil: // a timeout: the provider had the request
		return u.TotalTokens == 0
	case ex.completed:
		return u.TotalTokens == 0 && ex.status < 400 && ex.endpoint.generates()
	}
	return u.TotalTokens == 0 || u.CompletionTokens == 0 && ex.endpoint.generates()
}

// generates reports whether the endpoint's answers are generated text
// that providers count as completion tokens.
func (e endpoint) generates() bool { return e == endpointChat || e == endpointResponses }
