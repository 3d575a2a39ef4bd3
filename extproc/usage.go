package extproc

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz"
)

// metadata is the usage exposed to Envoy as dynamic metadata, for access
// logs and stream-done rate limiting.
func (ex *exchange) metadata() *structpb.Struct {
	u := ex.tr.Usage()
	ns := &structpb.Struct{Fields: map[string]*structpb.Value{
		"model":             structpb.NewStringValue(ex.model),
		"backend":           structpb.NewStringValue(ex.target.Backend),
		"provider":          structpb.NewStringValue(ex.target.Provider),
		"account_id":        structpb.NewStringValue(ex.principal.AccountID),
		"prompt_tokens":     structpb.NewNumberValue(float64(u.PromptTokens)),
		"completion_tokens": structpb.NewNumberValue(float64(u.CompletionTokens)),
		"total_tokens":      structpb.NewNumberValue(float64(u.TotalTokens)),
	}}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		ex.s.cfg.MetadataNamespace: structpb.NewStructValue(ns),
	}}
}

// record writes metrics and, for routed requests, the usage record. It runs
// on a context that survives the client going away, so no record is lost.
func (ex *exchange) record(ctx context.Context) {
	ex.recorded = true
	end := ex.s.now()
	u, estimated := ex.usageToCharge()
	ex.s.cfg.Metrics.observe(ex, u, end)
	ex.settleRate(ctx, u.TotalTokens)
	// A Fallback model's request is recorded also when no deployment
	// answered (Envoy's 503 after every attempt failed).
	if ex.tr == nil && ex.fallback == nil || ex.principal == nil {
		return
	}
	rec := authz.UsageRecord{
		RequestID:        ex.requestID,
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
		Estimated:        estimated,
		Duration:         end.Sub(ex.start),
		At:               end,
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ex.s.cfg.UsageTimeout)
	defer cancel()
	if err := ex.s.usage.AppendUsage(ctx, rec); err != nil {
		ex.log.Error("recording usage", zap.Error(err))
	}
	ex.log.Request("request done", zap.Int("status", ex.status), zap.Duration("duration", rec.Duration),
		zap.Int64("prompt_tokens", u.PromptTokens), zap.Int64("completion_tokens", u.CompletionTokens),
		zap.Bool("estimated", estimated))
}
