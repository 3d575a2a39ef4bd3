package extproc

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/ratelimit"
)

// meter is the exchange's rate-limit and budget bookkeeping: what its
// admission reserved, settled once however the exchange ends.
type meter struct {
	s    *Server
	log  *exchangeLog
	book *bookkeeping // the exchange's, for the settlement

	rules    []ratelimit.Rule    // the principal's rate limit rules
	limit    *ratelimit.Decision // the admission, nil if none was made
	reserved int64               // tokens the admission reserved
	// rateSettled: rate limits charged and the concurrency slot freed.
	rateSettled bool

	budgets       []ratelimit.Budget // the principal's budgets, nil if none was admitted
	spendAt       time.Time          // when they were: the period the exchange settles in
	spendReserved int64              // what the admission reserved from them
	spendSettled  bool
}

// admit admits a routed request (r, of flow f) against its budgets and
// its rate limits, before anything reaches a provider: it reserves the
// request's estimated cost at the time of the admission from its
// budgets, then tokens from its rate limits. A request the rate limits
// refuse gets its budget reservation back.
func (m *meter) admit(ctx context.Context, r *request, f flow) error {
	if err := m.admitSpend(ctx, r.principal, func(at time.Time) int64 { return m.s.costEstimate(r, f, at) }); err != nil {
		return err
	}
	if err := m.admitRate(ctx, r.principal, r.reservation(m.s.cfg.DefaultOutputTokens)); err != nil {
		m.settleSpend(ctx, func() int64 { return 0 })
		return err
	}
	return nil
}

// settle reconciles the reservations with what the exchange used: tokens,
// and what it cost (cost, asked only when budgets were admitted). It runs
// once, however the exchange ended.
func (m *meter) settle(ctx context.Context, tokens int64, cost func() int64) {
	m.settleRate(ctx, tokens)
	m.settleSpend(ctx, cost)
}

// admitSpend reserves the request's estimated cost from its budgets, and
// refuses it with OpenAI's 429 insufficient_quota when one is spent. A
// Spender failure fails open or closed as rate limits do.
func (m *meter) admitSpend(ctx context.Context, p *authz.Principal, costAt func(time.Time) int64) error {
	sp := m.s.cfg.Spender
	if sp == nil {
		return nil
	}
	bs := budgets(p)
	if len(bs) == 0 {
		return nil
	}
	m.spendAt = m.s.now()
	amount := costAt(m.spendAt)
	d, err := sp.Reserve(ctx, bs, m.spendAt, amount)
	if err != nil {
		m.s.cfg.Metrics.limiterError()
		if m.s.cfg.RateLimitFailClosed {
			m.log.Error("budgets failed; refusing (fail closed)", zap.Error(err))
			return errLimiterUnavailable(err)
		}
		m.log.Warn("budgets failed; admitting (fail open)", zap.Error(err))
		// Nothing reserved: the settlement charges the whole cost, kept
		// and made later if Redis still fails. (A reservation Redis made
		// but whose reply was lost is never settled: counted on top.)
		m.budgets = bs
		return nil
	}
	if st, refused := d.Refused(); refused {
		m.s.cfg.Metrics.budgetRefused(subjectType(st.Budget.Key))
		return errBudgetSpent(st, m.s.cfg.Currency)
	}
	m.budgets, m.spendReserved = bs, amount
	return nil
}

// settleSpend charges the exchange's budgets what it cost, less what it
// reserved, once, however the exchange ended: cost is what the usage the
// ledger charges (estimates included) cost, priced as the ledger prices
// it.
func (m *meter) settleSpend(ctx context.Context, cost func() int64) {
	if m.budgets == nil || m.spendSettled {
		return
	}
	m.spendSettled = true
	delta := min(cost(), ratelimit.MaxSpend) - m.spendReserved
	if delta == 0 && !alerting(m.budgets) {
		return
	}
	alerts, err := m.s.cfg.Spender.Charge(m.book.context(ctx, m.s.cfg.UsageTimeout), m.budgets, m.spendAt, delta)
	switch {
	case errors.Is(err, ratelimit.ErrChargeKept):
		m.s.cfg.Metrics.limiterError()
		m.log.Warn("charging budgets failed; kept to charge again", zap.Int64("nanos", delta), zap.Error(err))
	case err != nil:
		m.s.cfg.Metrics.limiterError()
		m.log.Error("charging budgets", zap.Int64("nanos", delta), zap.Error(err))
	}
	m.s.budgetAlerts(m.log, alerts)
}

// admitRate admits the request against its rate limits once it is
// routed, before anything reaches a provider, reserving tokens. A limiter
// failure fails open (logged and counted) unless the config says closed.
func (m *meter) admitRate(ctx context.Context, p *authz.Principal, reserve int64) error {
	if m.s.cfg.Limiter == nil {
		return nil
	}
	rules, zero := m.s.rules(p)
	if zero != nil {
		return errNothingAllowed(*zero)
	}
	if len(rules) == 0 {
		return nil
	}
	m.rules = rules
	d, err := m.s.cfg.Limiter.Admit(ctx, rules, reserve)
	if err != nil {
		m.s.cfg.Metrics.limiterError()
		if m.s.cfg.RateLimitFailClosed {
			m.log.Error("rate limiter failed; refusing (fail closed)", zap.Error(err))
			return errLimiterUnavailable(err)
		}
		m.log.Warn("rate limiter failed; admitting (fail open)", zap.Error(err))
		return nil
	}
	m.limit = &d
	if !d.Allowed {
		return errRateLimited(d)
	}
	m.reserved = reserve
	return nil
}

// settleRate reconciles the reservation with the tokens the exchange
// really used (or their estimate) and frees its concurrency slot, however
// the exchange ended. The charge happens also when admission failed open:
// usage is usage.
func (m *meter) settleRate(ctx context.Context, used int64) {
	if m.rateSettled {
		return
	}
	m.rateSettled = true
	if m.rules == nil || m.limit != nil && !m.limit.Allowed {
		return
	}
	ctx = m.book.context(ctx, m.s.cfg.UsageTimeout)
	if delta := used - m.reserved; delta != 0 {
		if err := m.s.cfg.Limiter.Charge(ctx, m.rules, delta); err != nil {
			m.s.cfg.Metrics.limiterError()
			m.log.Error("charging tokens to rate limits", zap.Int64("tokens", delta), zap.Error(err))
		}
	}
	if m.limit != nil {
		if err := m.s.cfg.Limiter.Release(ctx, m.limit.Lease); err != nil {
			m.log.Error("releasing a concurrency slot", zap.Error(err))
		}
	}
}

// bookkeeping is the context of the exchange's usage records and
// rate-limit charges (see exchange.bookkeeping).
type bookkeeping struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// context is the context of an exchange's usage records and rate-limit
// charges: it outlives the client, and timeout bounds it from its first
// use to the end of the exchange (done). One for all of them spares each
// a timer of its own.
func (b *bookkeeping) context(ctx context.Context, timeout time.Duration) context.Context {
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithTimeout(context.WithoutCancel(ctx), timeout)
	}
	return b.ctx
}

// done ends the bookkeeping context.
func (b *bookkeeping) done() {
	if b.cancel != nil {
		b.cancel()
	}
}
