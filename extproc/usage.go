package extproc

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/translate"
)

// metadata is the usage exposed to Envoy as dynamic metadata, for access
// logs and stream-done rate limiting.
func (ex *exchange) metadata() *structpb.Struct {
	u := ex.tr.Usage()
	m := new(metadataSlab)
	for i, v := range [...]string{ex.model, ex.target.Backend, ex.target.Provider, ex.principal.AccountID} {
		m.strings[i].StringValue = v
		m.values[i].Kind = &m.strings[i]
	}
	for i, v := range [...]int64{u.PromptTokens, u.CompletionTokens, u.TotalTokens} {
		m.numbers[i].NumberValue = float64(v)
		m.values[4+i].Kind = &m.numbers[i]
	}
	m.ns.Fields = map[string]*structpb.Value{
		"model": &m.values[0], "backend": &m.values[1], "provider": &m.values[2], "account_id": &m.values[3],
		"prompt_tokens": &m.values[4], "completion_tokens": &m.values[5], "total_tokens": &m.values[6],
	}
	m.nsKind.StructValue = &m.ns
	m.nsValue.Kind = &m.nsKind
	m.top.Fields = map[string]*structpb.Value{ex.s.cfg.MetadataNamespace: &m.nsValue}
	return &m.top
}

// metadataSlab holds the messages of metadata's Struct, allocated
// together rather than one a value and one a kind.
type metadataSlab struct {
	top, ns structpb.Struct
	nsValue structpb.Value
	nsKind  structpb.Value_StructValue
	values  [7]structpb.Value
	strings [4]structpb.Value_StringValue
	numbers [3]structpb.Value_NumberValue
}

// pricingUsage is u as prices count it: tokens, audio seconds and
// images, the images of the size and quality the client asked for (empty
// when it asked for none, which only prices for any size or quality
// match).
func (ex *exchange) pricingUsage(u translate.Usage) pricing.Usage {
	p := pricing.Usage{PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens,
		CompletionTokens: u.CompletionTokens, ReasoningTokens: u.ReasoningTokens,
		AudioSeconds: u.AudioSeconds, Images: u.Images}
	if ex.imgReq != nil {
		p.ImageSize, p.ImageQuality = ex.imgReq.Size, ex.imgReq.Quality
	}
	return p
}

// audioDuration is seconds of audio as the ledger records it, to the
// nanosecond; a duration past what time.Duration holds is its largest.
func audioDuration(seconds float64) time.Duration {
	switch d := seconds * float64(time.Second); {
	case !(d > 0):
		return 0
	case d >= math.MaxInt64:
		return math.MaxInt64
	default:
		return time.Duration(math.Round(d))
	}
}

// cost is what u cost at the price of the exchange's model in effect at
// end, or false when there is none.
func (ex *exchange) cost(u pricing.Usage, end time.Time) (pricing.Nanos, bool) {
	p, ok := ex.s.cfg.Prices.At(ex.model, end)
	if !ok {
		return 0, false
	}
	return p.Cost(u)
}

// record writes metrics and, for routed requests, the usage record. It runs
// on a context that survives the client going away, so no record is lost.
func (ex *exchange) record(ctx context.Context) {
	ex.recorded = true
	end := ex.s.now()
	u, estimated := ex.usageToCharge()
	ex.s.cfg.Metrics.observe(ex, u, end)
	ex.endSpan(u, end)
	ex.settleRate(ctx, u.TotalTokens)
	ex.settleSpend(ctx, u)
	// A Fallback model's request is recorded also when no deployment
	// answered (Envoy's 503 after every attempt failed).
	// A request refused a model it may not use is recorded too.
	if ex.tr == nil && ex.fallback == nil && !ex.refusedModel || ex.principal == nil {
		ex.logRequest(u, estimated, end, 0, false)
		ex.saveCapture(ctx, end)
		return
	}
	rec := authz.UsageRecord{
		RequestID:        ex.requestID,
		ClientRequestID:  ex.clientRequestID,
		KeyID:            ex.principal.KeyID,
		AccountID:        ex.principal.AccountID,
		Endpoint:         ex.endpoint.String(),
		Model:            ex.model,
		Backend:          ex.target.Backend,
		Status:           ex.status,
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		TotalTokens:      u.TotalTokens,
		CachedTokens:     u.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens,
		Audio:            audioDuration(u.AudioSeconds),
		Images:           u.Images,
		Estimated:        estimated,
		Duration:         end.Sub(ex.start),
		At:               end,
	}
	rec.Cost, rec.CostKnown = ex.cost(ex.pricingUsage(u), end)
	if err := ex.s.usage.AppendUsage(ex.bookkeeping(ctx), rec); err != nil {
		ex.log.Error("recording usage", zap.Error(err))
	}
	ex.logRequest(u, estimated, end, rec.Cost, rec.CostKnown)
	ex.saveCapture(ctx, end)
}

// logRequest writes the line each exchange ends with: of every refusal
// and error, and of the share Config.RequestLogSample of the rest. The
// exchange's logger already names its request, account, provider and
// model, as far as they are known.
func (ex *exchange) logRequest(u translate.Usage, estimated bool, end time.Time, cost pricing.Nanos, costKnown bool) {
	if ex.status < 400 && ex.s.cfg.RequestLogSample < 1 && rand.Float64() >= ex.s.cfg.RequestLogSample {
		return
	}
	ce, line := ex.log.requestLine("request done")
	if ce == nil {
		return
	}
	fs := *line
	// Durations as whole milliseconds: integers cost the encoder less
	// than the floats of zap.Duration, on every request.
	fs = append(fs, zap.Int("status", ex.status), zap.String("endpoint", ex.endpoint.String()),
		zap.Int64("duration_ms", end.Sub(ex.start).Milliseconds()))
	if ex.principal != nil {
		fs = append(fs, zap.String("key_prefix", ex.principal.KeyPrefix))
	}
	if ex.refusedModel { // never routed, so not yet named
		fs = append(fs, zap.String("model", ex.model))
	}
	if ex.target.Backend != "" {
		fs = append(fs, zap.String("backend", ex.target.Backend))
	}
	switch {
	case ex.errType != "":
		fs = append(fs, zap.String("error_type", ex.errType))
		if ex.errCode != "" {
			fs = append(fs, zap.String("error_code", ex.errCode))
		}
	case ex.status >= 400:
		fs = append(fs, zap.String("error_type", "provider_error"))
	}
	if !ex.firstByte.IsZero() {
		fs = append(fs, zap.Int64("time_to_first_token_ms", ex.firstByte.Sub(ex.start).Milliseconds()))
	}
	if ex.tr != nil {
		fs = append(fs, zap.Int64("prompt_tokens", u.PromptTokens), zap.Int64("completion_tokens", u.CompletionTokens),
			zap.Bool("estimated", estimated))
	}
	if costKnown {
		fs = append(fs, zap.String("cost", cost.String()), zap.String("currency", ex.s.cfg.Currency))
	}
	*line = fs
	writeRequest(ce, line)
}
