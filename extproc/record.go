package extproc

import (
	"context"
	"time"

	"go.uber.org/zap"

	"modelgate/authz/ledger"
)

// saveCapture redacts an exchange's capture and hands it to the sink.
func (s *Server) saveCapture(ctx context.Context, st *captureState, o *outcome, log *exchangeLog) {
	c := s.cfg.Capture
	if c == nil {
		return
	}
	rec := ledger.Capture{RequestID: o.requestID, Endpoint: o.endpoint.String(), Model: o.model, Status: o.status, At: o.end,
		RequestTruncated: st.req.truncated, ResponseTruncated: st.resp.truncated}
	if p := o.principal; p != nil {
		rec.AccountID, rec.KeyID = p.AccountID, p.KeyID
	}
	rec.Request = c.Redact.Apply(st.req.b, st.req.truncated)
	rec.Response = c.Redact.Apply(st.resp.b, st.resp.truncated)
	if err := c.Sink.SaveCapture(ctx, rec); err != nil {
		log.Error("saving a payload capture", zap.Error(err))
	}
}

// record settles the exchange's limits and budgets and hands its outcome
// (what it is at end) to every sink. It runs on a context that survives
// the client going away, so no record is lost.
func (ex *exchange) record(ctx context.Context) {
	ex.recorded = true
	warnUnbelievable(&ex.log, ex.tr)
	end := ex.s.now()
	u, estimated := ex.answer.usageToCharge(&ex.req, ex.tr)
	o := outcome{
		requestID: ex.req.id, clientRequestID: ex.req.clientID, session: ex.req.session, endpoint: ex.req.endpoint, principal: ex.req.principal, model: ex.req.model,
		requested: ex.req.requested, requestedAs: ex.req.requestedAs,
		backend: ex.route.target.Backend, provider: ex.route.target.Provider, upstreamModel: ex.route.target.Model, genAIProvider: ex.route.provider.GenAIName(),
		status: ex.answer.status, errType: ex.answer.failure.typ(), errCode: ex.answer.failure.code(), routed: ex.tr != nil, refusedModel: ex.req.refusedModel,
		usage: u, estimated: estimated, start: ex.start, firstByte: ex.answer.at.firstByte, end: end, finishReasons: ex.span.finishReasons,
		guards: ex.req.guards,
	}
	if g := ex.answer.body.guard; g != nil {
		o.guards, o.guardHold = append(o.guards, g.Outcomes()...), g.HoldTime()
	}
	if m := ex.s.router.models[ex.req.model]; m != nil && ex.s.router.candidates[m.ID] && ex.answer.delivery == sent { // what auto ranks by
		var ttft time.Duration
		if !o.firstByte.IsZero() {
			ttft = o.firstByte.Sub(o.start)
		}
		ex.s.health.observe(m, o.backend, o.status/100 == 2, deploymentFailed(&o), ttft, end)
	}
	ex.s.cfg.Metrics.observe(&o)
	ex.span.end(&o)
	guards := guardsCost(o.guards) // the guard services' calls, priced
	ex.meter.settle(ctx, o.usage.TotalTokens, func() int64 { return ex.s.spentCost(&ex.req, ex.flow, o.usage) + int64(guards) })
	if o.ledgered(ex.route.via.unanswered()) {
		o.cost, o.costKnown = ex.s.cost(ex.req.model, pricingUsage(ex.flow, o.usage), o.end)
		o.cost += guards
		ex.s.appendUsage(ex.bookkeeping(ctx), &o, &ex.log)
	}
	ex.log.request(&o, ex.s.cfg.RequestLogSample, ex.s.cfg.Currency)
	if ex.capture != nil {
		ex.s.saveCapture(ex.bookkeeping(ctx), ex.capture, &o, &ex.log)
	}
}

// deploymentFailed reports an exchange the deployment failed, which
// counts toward setting it aside: a 5xx, or a provider's 429, but for a
// guard service's failure.
func deploymentFailed(o *outcome) bool {
	return o.status >= 500 && o.errCode != codeGuardUnavailable || o.status == 429 && o.errType == ""
}

// appendUsage writes the outcome's usage record to the ledger.
func (s *Server) appendUsage(ctx context.Context, o *outcome, log *exchangeLog) {
	rec := ledger.UsageRecord{
		RequestID:          o.requestID,
		ClientRequestID:    o.clientRequestID,
		SessionID:          o.session,
		KeyID:              o.principal.KeyID,
		AccountID:          o.principal.AccountID,
		Endpoint:           o.endpoint.String(),
		Model:              o.model,
		RequestedModel:     o.requested,
		ProviderModel:      o.upstreamModel,
		Backend:            o.backend,
		Status:             o.status,
		PromptTokens:       o.usage.PromptTokens,
		CompletionTokens:   o.usage.CompletionTokens,
		TotalTokens:        o.usage.TotalTokens,
		CachedTokens:       o.usage.CachedTokens,
		CacheWriteTokens:   o.usage.CacheWriteTokens,
		CacheWrite1hTokens: o.usage.CacheWrite1hTokens,
		ReasoningTokens:    o.usage.ReasoningTokens,
		Audio:              audioDuration(o.usage.AudioSeconds),
		Images:             o.usage.Images,
		WebSearchRequests:  o.usage.WebSearchRequests,
		Estimated:          o.estimated,
		Duration:           o.end.Sub(o.start),
		At:                 o.end,
		Cost:               o.cost,
		CostKnown:          o.costKnown,
	}
	for _, g := range o.guards {
		rec.Guardrails = append(rec.Guardrails, ledger.GuardOutcome{Rule: g.Rule, Phase: g.Phase.String(), Result: string(g.Result)})
	}
	if err := s.usage.AppendUsage(ctx, rec); err != nil {
		log.Error("recording usage", zap.Error(err))
	}
}
