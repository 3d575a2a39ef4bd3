package extproc

import (
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/extproc/guard"
	"modelgate/translate"
)

// outcome is how an exchange ended, as its sinks record it: the usage
// ledger, the metrics, the trace span, the request log line and the
// payload capture each take it, and none of them the exchange. It names
// the deployment by backend and provider, never by its credentials.
type outcome struct {
	requestID, clientRequestID string
	session                    string
	endpoint                   endpoint
	principal                  *authz.Principal // nil before the key was checked
	model                      string           // the public model id, also of a refusal
	// requested is the model name the client sent; requestedAs the
	// configured name it matched (request.requestedAs).
	requested, requestedAs string
	// backend, provider and upstreamModel name the deployment that
	// answered; empty when there was none.
	backend, provider, upstreamModel string
	genAIProvider                    string // gen_ai.provider.name
	status                           int
	// errType and errCode are those of the error the gateway answered
	// with; empty when the answer was the provider's.
	errType, errCode string
	// routed: a translator was built, so usage was measured; refusedModel:
	// a model the principal may not use was refused.
	routed, refusedModel bool
	usage                translate.Usage
	estimated            bool
	// cost is what usage cost at the model's price, when it has one (and
	// the exchange goes to the ledger).
	cost                  pricing.Nanos
	costKnown             bool
	start, firstByte, end time.Time
	finishReasons         []string
	// guards are what each guardrail rule did, request rules first;
	// guardHold how long response rules held a stream's first text.
	guards    []guard.Outcome
	guardHold time.Duration
}

// ledgered reports an outcome the usage ledger records: a routed request
// of a known principal, a Fallback model's also when no deployment
// answered (Envoy's 503 after every attempt failed), a refusal of a
// model the principal may not use, and a request guardrails checked,
// beside its successes.
func (o *outcome) ledgered(unanswered bool) bool {
	return o.principal != nil && (o.routed || unanswered || o.refusedModel || len(o.guards) > 0)
}

// request writes the line each exchange ends with: of every refusal and
// error, and of the share sample of the rest. The logger already names
// the request, account, provider and model, as far as they are known.
func (l *exchangeLog) request(o *outcome, sample float64, currency string) {
	if o.status < 400 && sample < 1 && rand.Float64() >= sample {
		return
	}
	ce, line := l.requestLine("request done")
	if ce == nil {
		return
	}
	fs := *line
	// Durations as whole milliseconds: integers cost the encoder less
	// than the floats of zap.Duration, on every request.
	fs = append(fs, zap.Int("status", o.status), zap.String("endpoint", o.endpoint.String()),
		zap.Int64("duration_ms", o.end.Sub(o.start).Milliseconds()))
	if o.principal != nil {
		fs = append(fs, zap.String("key_prefix", o.principal.KeyPrefix))
	}
	if o.refusedModel { // never routed, so not yet named
		fs = append(fs, zap.String("model", o.model))
	}
	if o.backend != "" {
		fs = append(fs, zap.String("backend", o.backend))
	}
	switch {
	case o.errType != "":
		fs = append(fs, zap.String("error_type", o.errType))
		if o.errCode != "" {
			fs = append(fs, zap.String("error_code", o.errCode))
		}
	case o.status >= 400:
		fs = append(fs, zap.String("error_type", "provider_error"))
	}
	if !o.firstByte.IsZero() {
		fs = append(fs, zap.Int64("time_to_first_token_ms", o.firstByte.Sub(o.start).Milliseconds()))
	}
	if o.routed {
		fs = append(fs, zap.Int64("prompt_tokens", o.usage.PromptTokens), zap.Int64("completion_tokens", o.usage.CompletionTokens),
			zap.Bool("estimated", o.estimated))
	}
	if o.costKnown {
		fs = append(fs, zap.String("cost", o.cost.String()), zap.String("currency", currency))
	}
	*line = fs
	writeRequest(ce, line)
}
