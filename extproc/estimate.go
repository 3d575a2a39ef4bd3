package extproc

import (
	"bytes"
	"encoding/json"

	"modelgate/translate"
	"modelgate/translate/api"
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
// API's max_output_tokens; zero when it sets none.
func maxOutputTokens(members map[string]json.RawMessage) int64 {
	return api.PositiveInteger(members, "max_completion_tokens", "max_tokens", "max_output_tokens")
}

// textIn says which members of an answer hold its generated text.
type textIn int

const (
	// chatChunks: chat completion chunks, whose content, reasoning_content,
	// refusal and tool call arguments are deltas.
	chatChunks textIn = iota
	// responsesEvents: the Responses API's stream events, whose deltas
	// are all "delta"; their done events and output items repeat the text
	// (text, arguments) and are not counted.
	responsesEvents
	// messagesEvents: the Messages API's stream events, whose deltas
	// hold text, thinking and partial_json.
	messagesEvents
	// wholeAnswer: a JSON answer, chat's or the Responses API's (whose
	// output parts hold "text").
	wholeAnswer
)

// generatedText counts the generated text an answer carried to the
// client: the string values of the members that hold it (textIn). Every
// translator's output is the OpenAI shape, so one count serves every
// provider; JSON of any spacing is read (an OpenAI-compatible server's
// chunks pass through as it wrote them, with a space after the colon from
// Python servers). It is only an estimate's input, so JSON escapes count as
// the bytes they take.
func generatedText(out []byte, in textIn) int {
	n := 0
	for i := 0; i < len(out); {
		q := bytes.IndexByte(out[i:], '"')
		if q < 0 {
			break
		}
		start := i + q + 1
		end := start + stringEnd(out[start:])
		i = end + 1
		j := skipSpace(out, i)
		if j >= len(out) || out[j] != ':' {
			continue // a value, or an element of an array
		}
		j = skipSpace(out, j+1)
		if j >= len(out) || out[j] != '"' {
			i = j
			continue // the member's value is not a string
		}
		vs := j + 1
		ve := vs + stringEnd(out[vs:])
		if textMember(out[start:end], in) {
			n += ve - vs
		}
		i = ve + 1
	}
	return n
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// textMember reports a member that holds generated text.
func textMember(key []byte, in textIn) bool {
	switch string(key) {
	case "delta":
		return in == responsesEvents
	case "content", "reasoning_content", "refusal", "arguments":
		return in != responsesEvents && in != messagesEvents
	case "text":
		return in == wholeAnswer || in == messagesEvents
	case "thinking":
		return in == messagesEvents || in == wholeAnswer
	case "partial_json":
		return in == messagesEvents
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
// exchange never routed. Either is sane (translate.Usage.Sane).
func (ex *exchange) usageToCharge() (u translate.Usage, estimated bool) {
	if ex.tr == nil {
		return translate.Usage{}, false
	}
	u = ex.providerUsage()
	if !ex.needsEstimate(u) {
		return u, false
	}
	prompt := u.PromptTokens // the provider counts the prompt before it answers: exact when given
	if prompt == 0 {
		prompt = ex.promptTokens()
	}
	est := translate.Usage{
		PromptTokens:       prompt,
		CompletionTokens:   max(u.CompletionTokens, tokensOf(ex.answer.generated)),
		CachedTokens:       u.CachedTokens,
		CacheWriteTokens:   u.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens,
		ReasoningTokens:    u.ReasoningTokens,
		// Audio, images and web searches are not estimated: the
		// provider's count, if any, stands.
		AudioSeconds:      u.AudioSeconds,
		Images:            u.Images,
		WebSearchRequests: u.WebSearchRequests,
	}
	return est.Sane(), true
}

// promptTokens is the estimated prompt of the request the provider got:
// the one admitted, else (the answer of a Fallback model, whose
// deployment's request only its attempt saw) an estimate of that request,
// translated again for this alone: RequestBody is pure.
func (ex *exchange) promptTokens() int64 {
	if ex.req.prompt == 0 && !ex.req.endpoint.spec().form {
		if up, err := ex.tr.RequestBody(); err == nil {
			ex.req.prompt = promptEstimate(up.Body)
		}
	}
	return ex.req.prompt
}

// needsEstimate: an exchange the provider received and that did not end
// with a complete answer, or a complete success without any usage. A
// provider's usage before its answer ended is partial (Anthropic's
// message_start counts one output token, Gemini's chunks what they carried
// so far), so an answer cut short, by the client, by Envoy or by the
// provider (translate.Usage.Partial), is always measured against the text
// the client got, whatever the provider reported.
func (ex *exchange) needsEstimate(u translate.Usage) bool {
	switch {
	case ex.answer.delivery != sent:
		return false
	case u.Partial: // the provider ended its stream before its end
		return true
	case ex.answer.mode == bodyEnvoyReply: // a timeout: the provider had the request
		return u.TotalTokens == 0
	case ex.answer.completed:
		return u.TotalTokens == 0 && ex.answer.status < 400 && ex.req.endpoint.spec().generates
	}
	return u.TotalTokens == 0 || ex.req.endpoint.spec().generates
}
