package extproc

import (
	"strconv"
	"strings"

	"modelgate/authz"
	"modelgate/extproc/guard"
	"modelgate/translate"
	"modelgate/translate/api"
)

// request is what the exchange knows of the client's request.
type request struct {
	id          string // the gateway's id of the exchange (newRequestID)
	clientID    string // the x-request-id the request came with
	session     string // the agent session the client named (sessionID)
	endpoint    endpoint
	path        string // the client's :path
	contentType string // of the client's request body
	principal   *authz.Principal
	model       string // the public model id it was routed to
	// requested is the model name the client sent (an alias, an auto
	// model's id, the id itself), as the gateway keeps a client's label.
	requested string
	// requestedAs is the configured name requested matched (the id, an
	// alias, a prefix with its *), which labels are bounded to.
	requestedAs string
	// auto: requested names an auto model, which routed it to model.
	auto bool
	// drop are the capabilities the request asks for that its model
	// lacks and is configured to serve it without (asks, router.serves).
	drop []api.Capability
	// asks is what it asks of its model (ask), kept here for pick.
	asks      asks
	stream    bool  // the client asked for a stream
	prompt    int64 // estimated prompt tokens
	maxOutput int64 // the bound on the answer the provider is sent: the client's or translator's; zero for none
	// warning names what the gateway left out of the request for the
	// model's configuration (api.LeftOut), joined with the translator's
	// warning in the answer's header.
	warning string
	// texts finds the client's text in the parsed request, for the
	// guardrails; nil when no rule reads it (or for an endpoint they do
	// not check).
	texts func() []translate.RequestText
	// maskTexts replaces the texts texts found, in their order, with
	// masked, and returns the request's body as masked: the request a
	// provider gets is the masked one.
	maskTexts func(masked []string) []byte
	// changedBody is the body as the gateway changed it (what its model
	// drops left out, what a rule masked), which a Fallback model's
	// router-level stream sends on in place of the client's; nil when
	// unchanged.
	changedBody []byte
	// answerDialect is the API of the answer, whose text the response
	// rules read; zero when they read none (or for an endpoint they do
	// not check). includeUsage: a chat stream's client asked for usage.
	answerDialect translate.Dialect
	includeUsage  bool
	// guards are what each guardrail did to the exchange, as they ran.
	guards []guard.Outcome
	// answers is how many answers the request asks for (chat's n, which
	// Gemini is sent as candidateCount): each is bounded by maxOutput, so
	// the reservation counts it that many times. Zero means one.
	answers int64
	// searches is the most web searches the request allows (a Messages
	// web search tool's max_uses), which budgets reserve; zero when it
	// sets no bound.
	searches int64
	// refusedModel: a model the principal may not use was refused,
	// recorded with its 403.
	refusedModel bool
	// dialect is the API the client speaks: its errors and model list
	// have that API's shape.
	dialect *dialect
}

// reservation is what the request may consume, reserved from its token
// limits at admission: its estimated prompt and the bound on the answer
// the provider is sent (maxOutput), else Config.DefaultOutputTokens for
// endpoints that generate, once for every answer it asks for (n: 128
// answers of 100 tokens may cost 12,800).
func (r *request) reservation(defaultOutput int64) int64 {
	out := r.maxOutput
	if out == 0 && r.endpoint.spec().generates {
		out = defaultOutput
	}
	return max(saturatingAdd(r.prompt, saturatingMul(out, max(r.answers, 1))), 1)
}

// maxReservation bounds a reservation far above any limit an operator
// sets, and far below where int64 arithmetic on it overflows: a bound
// that overflowed to a negative number would reserve nothing.
const maxReservation = 1 << 52

func saturatingMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxReservation/b {
		return maxReservation
	}
	return a * b
}

func saturatingAdd(a, b int64) int64 { return min(max(a, 0)+max(b, 0), maxReservation) }

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

// checkBodyHeaders refuses what the headers already show to be wrong: no
// body, a declared length over the endpoint's limit, a multipart body for
// a JSON endpoint. Transcriptions take multipart bodies only; the parser
// judges their content type.
func (r *request) checkBodyHeaders(hm headerMap, endOfStream bool, limit int64) error {
	if endOfStream {
		return errMissingBody()
	}
	if cl, err := strconv.ParseInt(hm.get("content-length"), 10, 64); err == nil && cl > limit {
		return errTooLarge()
	}
	r.contentType = hm.get("content-type")
	if r.endpoint.spec().form {
		return nil
	}
	if ct := hm.get("content-type"); ct != "" {
		if mt := translate.MediaType(ct); strings.HasPrefix(mt, "multipart/") {
			return errUnsupportedMediaType(mt)
		}
	}
	return nil
}
