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

// usageToCharge is the provider's usage when it reported its completion,
// else an estimate from what is known, reported as such; zero for an
// exchange never routed. Either is sane (translate.Usage.Sane).
func (a *answer) usageToCharge(r *request, tr translate.Translator) (u translate.Usage, estimated bool) {
	if tr == nil {
		return translate.Usage{}, false
	}
	u = providerUsage(tr)
	if !a.needsEstimate(u, r.endpoint) {
		return u, false
	}
	prompt := u.PromptTokens // the provider counts the prompt before it answers: exact when given
	if prompt == 0 {
		prompt = r.promptTokens(tr)
	}
	est := translate.Usage{
		PromptTokens:       prompt,
		CompletionTokens:   max(u.CompletionTokens, tokensOf(a.generated)),
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
func (r *request) promptTokens(tr translate.Translator) int64 {
	if r.prompt == 0 && !r.endpoint.spec().form {
		if up, err := tr.RequestBody(); err == nil {
			r.prompt = promptEstimate(up.Body)
		}
	}
	return r.prompt
}

// needsEstimate: an exchange the provider received and that did not end
// with a complete answer, or a complete success without any usage. A
// provider's usage before its answer ended is partial (Anthropic's
// message_start counts one output token, Gemini's chunks what they carried
// so far), so an answer cut short, by the client, by Envoy or by the
// provider (translate.Usage.Partial), is always measured against the text
// the client got, whatever the provider reported.
func (a *answer) needsEstimate(u translate.Usage, ep endpoint) bool {
	switch {
	case a.delivery != sent:
		return false
	case u.Partial: // the provider ended its stream before its end
		return true
	case a.mode == bodyEnvoyReply: // a timeout: the provider had the request
		return u.TotalTokens == 0
	case a.completed:
		return u.TotalTokens == 0 && a.status < 400 && ep.spec().generates
	}
	return u.TotalTokens == 0 || ep.spec().generates
}
