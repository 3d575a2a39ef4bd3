package extproc

import (
	"math"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz/pricing"
	"modelgate/translate"
)

// warnUnbelievable logs the usage the provider stated when the gateway
// could not believe it as it was (translate.Usage.Sane changed it): an
// operator's cue that a provider, or a server posing as one, sends
// counts out of range.
func warnUnbelievable(log *exchangeLog, tr translate.Translator) {
	if tr == nil {
		return
	}
	u := tr.Usage()
	if u.Sane() == u {
		return
	}
	log.Warn("provider usage out of range", zap.Int64("prompt_tokens", u.PromptTokens),
		zap.Int64("completion_tokens", u.CompletionTokens), zap.Int64("total_tokens", u.TotalTokens),
		zap.Int64("cached_tokens", u.CachedTokens), zap.Int64("cache_write_tokens", u.CacheWriteTokens),
		zap.Int64("cache_write_1h_tokens", u.CacheWrite1hTokens), zap.Int64("reasoning_tokens", u.ReasoningTokens),
		zap.Float64("audio_seconds", u.AudioSeconds), zap.Int64("images", u.Images), zap.Int64("web_search_requests", u.WebSearchRequests))
}

// metadata is the usage u of request r on route rt exposed to Envoy as
// dynamic metadata, for access logs and stream-done rate limiting.
func (s *Server) metadata(r *request, rt *route, u translate.Usage) *structpb.Struct {
	m := new(metadataSlab)
	for i, v := range [...]string{r.model, rt.target.Backend, rt.target.Provider, r.principal.AccountID} {
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
	m.top.Fields = map[string]*structpb.Value{s.cfg.MetadataNamespace: &m.nsValue}
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

// pricingUsage is u as prices count it, for flow f: tokens, audio seconds, images
// and web searches, the images of the size and quality the client asked
// for (empty when it asked for none, which only prices for any size or
// quality match).
func pricingUsage(f flow, u translate.Usage) pricing.Usage {
	p := pricing.Usage{PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens, CompletionTokens: u.CompletionTokens, ReasoningTokens: u.ReasoningTokens,
		AudioSeconds: u.AudioSeconds, Images: u.Images, WebSearchRequests: u.WebSearchRequests}
	if f != nil {
		p = f.price(p, false)
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

// cost is what u cost at the price of the model in effect at end, or
// false when there is none.
func (s *Server) cost(model string, u pricing.Usage, end time.Time) (pricing.Nanos, bool) {
	p, ok := s.cfg.Prices.At(model, end)
	if !ok {
		return 0, false
	}
	return p.Cost(u)
}
