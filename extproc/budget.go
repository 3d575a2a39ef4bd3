package extproc

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// budgets are the principal's budgets as the Spender counts them: the
// key's, the account's and the group's, each on its own counter.
func budgets(p *authz.Principal) []ratelimit.Budget {
	if p.KeyBudget == nil && p.AccountBudget == nil && p.GroupBudget == nil {
		return nil
	}
	out := make([]ratelimit.Budget, 0, 3)
	add := func(subject string, b *authz.Budget) {
		if b != nil {
			out = append(out, BudgetOf(subject, *b))
		}
	}
	add("key:"+p.KeyID, p.KeyBudget)
	add("account:"+p.AccountID, p.AccountBudget)
	if p.GroupID != "" {
		add("group:"+p.GroupID, p.GroupBudget)
	}
	return out
}

// BudgetOf is a subject's budget ("key:<id>", "account:<id>",
// "group:<id>") as the Spender counts it.
func BudgetOf(subject string, b authz.Budget) ratelimit.Budget {
	r := ratelimit.Budget{Key: subject, Max: int64(b.Amount), Window: b.Window, Alerts: b.Alerts}
	switch b.Period {
	case authz.PeriodDay:
		r.Renewal = ratelimit.Daily
	case authz.PeriodMonth:
		r.Renewal = ratelimit.Monthly
	default:
		r.Renewal = ratelimit.Windowed
	}
	return r
}

// BudgetLedger is what the usage ledger's store tells budgets: a
// subject's ("key:<id>", "account:<id>", "group:<id>") spending since a
// time. authz.Store has it.
type BudgetLedger interface {
	SpentSince(ctx context.Context, subject string, since time.Time) (pricing.Nanos, error)
}

// LedgerSpender is sp rebuilding a missing counter (a new process, a
// Redis that came back empty, a new period) from the ledger before the
// first admission that needs it, when sp can tell a counter missing
// (ratelimit.Seedable); otherwise sp. See ratelimit.LedgerSpender.
func LedgerSpender(sp ratelimit.Spender, l BudgetLedger) ratelimit.Spender {
	if l == nil {
		return sp
	}
	return ratelimit.LedgerSpender(sp, func(ctx context.Context, subject string, since time.Time) (int64, error) {
		n, err := l.SpentSince(ctx, subject, since)
		return int64(n), err
	})
}

// costEstimate is what request r of flow f may cost at the price in
// effect at at: its estimated prompt and its bound on the answer, as the
// token reservation counts them, the images it asks for, and the web
// searches it allows (a web search tool's max_uses; none without a
// bound). Zero without a price.
func (s *Server) costEstimate(r *request, f flow, at time.Time) int64 {
	p, ok := s.cfg.Prices.At(r.model, at)
	if !ok {
		return 0
	}
	u := pricing.Usage{PromptTokens: r.prompt, WebSearchRequests: r.searches}
	if r.endpoint.spec().generates {
		u.CompletionTokens = r.reservation(s.cfg.DefaultOutputTokens) - r.prompt
	}
	u = f.price(u, true) // audio's length is known only after
	c, _ := p.Cost(u)
	return min(int64(c), ratelimit.MaxSpend)
}

// warner is a logger of warnings: an exchange's, or the server's.
type warner interface {
	Warn(msg string, fs ...zap.Field)
}

// budgetAlerts logs and counts the alerts a charge reached.
func (s *Server) budgetAlerts(log warner, alerts []ratelimit.Alert) {
	for _, a := range alerts {
		s.cfg.Metrics.budgetAlert(subjectType(a.Budget.Key), a.Percent)
		log.Warn("budget alert", zap.String("subject", a.Budget.Key), zap.Int("percent", a.Percent),
			zap.String("spent", pricing.Nanos(a.Spent).String()), zap.String("budget", pricing.Nanos(a.Budget.Max).String()),
			zap.String("currency", s.cfg.Currency), zap.Stringer("period", a.Budget.Renewal), zap.Time("renews", a.Renews))
	}
}

// spentCost is what usage u of request r (of flow f) cost at the model's
// price now, as the ledger prices it, for settleSpend.
func (s *Server) spentCost(r *request, f flow, u translate.Usage) int64 {
	c, _ := s.cost(r.model, pricingUsage(f, u), s.now())
	return int64(c)
}

func alerting(bs []ratelimit.Budget) bool {
	for _, b := range bs {
		if b.Alerts {
			return true
		}
	}
	return false
}

// subjectType is "key", "account" or "group": a budget's metric label.
func subjectType(key string) string {
	kind, _, _ := strings.Cut(key, ":")
	return kind
}

// errBudgetSpent is OpenAI's answer to an account out of credit, 429
// insufficient_quota, saying which budget is spent and when it renews.
// x-should-retry tells OpenAI's SDKs not to retry what will not pass
// before then.
func errBudgetSpent(st ratelimit.BudgetStatus, currency string) *APIError {
	whose := map[string]string{"key": "this API key's", "account": "your account's", "group": "your group's"}[subjectType(st.Budget.Key)]
	period := map[ratelimit.Renewal]string{ratelimit.Daily: "daily", ratelimit.Monthly: "monthly"}[st.Budget.Renewal]
	if period == "" {
		period = st.Budget.Window.String()
	}
	msg := fmt.Sprintf("You exceeded your current quota: %s %s budget of %s %s is spent. It renews at %s.",
		whose, period, currency, pricing.Nanos(st.Budget.Max), st.Renews.UTC().Format(time.RFC3339))
	if st.Budget.Max == 0 {
		msg = fmt.Sprintf("You exceeded your current quota: %s %s budget is %s 0, which allows no requests.",
			whose, period, currency)
	}
	return &APIError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "insufficient_quota",
		Message: msg, noRetry: true}
}
