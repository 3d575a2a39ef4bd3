package extproc

import (
	"net/http"
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"modelgate/envoy/routing"
	"modelgate/extproc/guard"
	"modelgate/translate"
)

// answer is the answer as the client gets it.
type answer struct {
	head   translate.Head
	status int // the client-facing status
	// mode is what becomes of the response body, chosen at the response
	// headers (or when the answer is cut).
	mode bodyMode
	// failure is the error the gateway answered with; nil when the
	// answer was the provider's (or Envoy's, envoyReply).
	failure    *APIError
	envoyReply *APIError // one of Envoy's own replies, as the client sees it
	delivery   delivery  // whether the request went to the provider
	at         answerTimes
	generated  int  // bytes of generated text the client got (translate.Output)
	completed  bool // the answer ended as it should
	body       bodyState
}

// bodyMode is what the exchange does with the response body's messages.
type bodyMode uint8

const (
	// bodyPass passes them on as they are: the answer to a request
	// never routed, or after the exchange was settled.
	bodyPass bodyMode = iota
	// bodyTranslate translates a buffered answer, whole.
	bodyTranslate
	// bodyStream translates a stream, chunk by chunk.
	bodyStream
	// bodyGather gathers a large buffered answer from a stream, and
	// translates it whole at its end.
	bodyGather
	// bodyEnvoyReply replaces one of Envoy's own replies with the
	// gateway's error (envoyReply).
	bodyEnvoyReply
	// bodyDropped drops them: a panic or a failure ended the stream.
	bodyDropped
)

// delivery is whether the request went to the provider.
type delivery uint8

const (
	unsent delivery = iota
	sent            // the request went
	// late: the reply to the request body came after Envoy's
	// message_timeout, which Envoy answered with a 504 of its own; the
	// request never went.
	late
)

// answerTimes are the times of the answer.
type answerTimes struct {
	sent      time.Time // when the request went
	firstByte time.Time // first streamed bytes to the client
	lastChunk time.Time // when the last streamed chunk came
}

// bodyState is what the body's mode keeps between messages.
type bodyState struct {
	chunk    *chunkReply // the reply to a streamed chunk, made once
	gathered []byte      // what arrived of a gathered answer
	// guard holds and checks the answer's text for the response rules;
	// nil when none reads it.
	guard *guard.Answer
}

// envoyReplied takes one of Envoy's own replies with status as the
// answer, apiErr as the client sees it (reached: the provider may have
// had the request), and answers its response headers: the status stays,
// the body becomes the gateway's error (envoyReplyBody).
func (a *answer) envoyReplied(apiErr *APIError, reached bool, status int) *extprocv3.ProcessingResponse {
	a.envoyReply, a.mode, a.status, a.completed = apiErr, bodyEnvoyReply, apiErr.Status, true
	if !reached {
		a.delivery = unsent
	}
	var mut headers
	mut.Remove(routing.LocalReplyHeader)
	mut.Set("content-type", "application/json")
	if apiErr.Status != status {
		mut.Set(":status", strconv.Itoa(apiErr.Status))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}},
	}}
}

// envoyReplyBody replaces the body of one of Envoy's own replies, which
// Envoy sends whole (local replies are not streamed and have no
// trailers), with the gateway's error in the client's dialect.
func (a *answer) envoyReplyBody(d *dialect) *extprocv3.ProcessingResponse {
	body := d.errorBody(a.envoyReply)
	var mut headers
	mut.SetInt("content-length", int64(len(body)))
	return bodyReply(body, true, &mut)
}

// settledBody answers a response body chunk of an exchange already
// settled: the body of one of Envoy's own replies (which follows headers
// answered without a body), or chunks after a panic ended the stream.
func (a *answer) settledBody(d *dialect) *extprocv3.ProcessingResponse {
	switch a.mode {
	case bodyEnvoyReply:
		return a.envoyReplyBody(d)
	case bodyDropped:
		return bodyReply(nil, true, nil)
	}
	return bodyReply(nil, false, nil)
}

// brokenStatus is the status of an exchange that ended before its answer
// did: 504 when the provider's silence came near its timeout (Envoy then
// ends the stream; the quarter allows for the time between Envoy's read
// and the server's), 502 for a buffered answer cut short, else 499.
// Envoy ends the ext_proc stream the same way when the client leaves and
// when the provider resets mid-answer, so the gateway cannot tell those
// apart; both are recorded as 499. p is the phase it ended in, t the
// timeouts of its route, stream whether the client asked for a stream.
func (a *answer) brokenStatus(now time.Time, p phase, t routing.Timeouts, stream bool) int {
	switch {
	case a.body.guard != nil && a.body.guard.Blocked():
		return a.status // the client got the whole refusal
	case a.mode == bodyDropped:
		return http.StatusInternalServerError
	case a.delivery == late: // Envoy's own 504 (its message_timeout)
		return http.StatusGatewayTimeout
	case p == phaseResponseHeaders && a.delivery == sent:
		limit := t.ResponseHeaders
		if stream && t.StreamIdle > 0 && (limit == 0 || t.StreamIdle < limit) {
			limit = t.StreamIdle
		}
		if limit > 0 && now.Sub(a.at.sent) >= limit*3/4 {
			return http.StatusGatewayTimeout
		}
	case p == phaseResponseBody && a.head.Stream:
		if idle := t.StreamIdle; idle > 0 && now.Sub(a.at.lastChunk) >= idle*3/4 {
			return http.StatusGatewayTimeout
		}
	case p == phaseResponseBody:
		// A buffered answer ending early: Envoy answered the client itself
		// (an upstream reset mid-body is its 502 while it holds the head).
		return http.StatusBadGateway
	}
	return 499 // the client closed the request
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

// gather collects a large buffered answer from its chunks, up to limit
// bytes: done with the whole body at the end of the stream.
func (a *answer) gather(chunk []byte, eos bool, limit int64) (body []byte, done bool, err error) {
	a.body.gathered = append(a.body.gathered, chunk...)
	if int64(len(a.body.gathered)) > limit {
		a.body.gathered = nil
		return nil, false, &APIError{Status: http.StatusBadGateway, Type: typeServer,
			Message: "The provider's answer is larger than the gateway accepts."}
	}
	if !eos {
		return nil, false, nil
	}
	body, a.body.gathered = a.body.gathered, nil
	return body, true, nil
}

// providerUsage is the usage of tr as the gateway believes it
// (translate.Usage.Sane): counts in [0, translate.MaxUsageCount],
// consistent with each other. Whatever reads a provider's usage reads it
// here, never from the translator.
func providerUsage(tr translate.Translator) translate.Usage { return tr.Usage().Sane() }
