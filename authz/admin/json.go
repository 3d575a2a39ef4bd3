package admin

import (
	"context"
	"encoding/json"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

// The admin API's JSON shapes. Lists are never null; unset limits and
// times are.

// limitsJSON is authz.Limits with snake_case names; null is unset.
type limitsJSON struct {
	RequestsPerMinute  *int64 `json:"requests_per_minute"`
	TokensPerMinute    *int64 `json:"tokens_per_minute"`
	TokensPerDay       *int64 `json:"tokens_per_day"`
	ConcurrentRequests *int64 `json:"concurrent_requests"`
}

// Guardrails, in the shapes of groups, accounts and keys, name the
// optional guardrail rules of the gateway's config that the level adds to
// its requests. The admin does not know the config's rules: the gateway
// ignores (and logs) names it does not have.

type groupJSON struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	Models     []string      `json:"models"`
	Guardrails []string      `json:"guardrails"`
	Limits     limitsJSON    `json:"limits"`
	Budget     *authz.Budget `json:"budget"`
	CreatedAt  time.Time     `json:"created_at"`
}

func groupOut(g authz.Group) groupJSON {
	return groupJSON{g.ID, g.Name, nonNil(g.Models), nonNil(g.Guardrails), limitsJSON(g.Limits), g.Budget, g.CreatedAt}
}

type accountJSON struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	GroupID    string        `json:"group_id"`
	Models     []string      `json:"models"`
	Guardrails []string      `json:"guardrails"`
	Disabled   bool          `json:"disabled"`
	Limits     limitsJSON    `json:"limits"`
	Budget     *authz.Budget `json:"budget"`
	CreatedAt  time.Time     `json:"created_at"`
}

func accountOut(a authz.Account) accountJSON {
	return accountJSON{a.ID, a.Name, a.GroupID, nonNil(a.Models), nonNil(a.Guardrails), a.Disabled, limitsJSON(a.Limits),
		a.Budget, a.CreatedAt}
}

// keyJSON never holds the secret or its hash: only the visible prefix.
type keyJSON struct {
	ID         string   `json:"id"`
	AccountID  string   `json:"account_id"`
	Name       string   `json:"name"`
	Prefix     string   `json:"prefix"`
	Models     []string `json:"models"`
	Guardrails []string `json:"guardrails"`
	Disabled   bool     `json:"disabled"`
	// State is active, disabled, expired or revoked.
	State      string        `json:"state"`
	Budget     *authz.Budget `json:"budget"`
	ExpiresAt  *time.Time    `json:"expires_at"`
	RevokedAt  *time.Time    `json:"revoked_at"`
	CreatedAt  time.Time     `json:"created_at"`
	LastUsedAt *time.Time    `json:"last_used_at"`
}

func (h *Handler) keyOut(k authz.Key) keyJSON { return keyAt(k, h.cfg.Now()) }

func keyAt(k authz.Key, now time.Time) keyJSON {
	return keyJSON{k.ID, k.AccountID, k.Name, k.Prefix, nonNil(k.Models), nonNil(k.Guardrails), k.Disabled, keyState(k, now),
		k.Budget, k.ExpiresAt, k.RevokedAt, k.CreatedAt, k.LastUsedAt}
}

// CommandActor is the audit log's actor of changes made with the
// `modelgate keys` command.
const CommandActor = "modelgate keys command"

// AuditCommand records a change made outside the admin API (the keys
// command) in the audit log, with before and after as the admin API shows
// them: a key (authz.Key) or an account (authz.Account), nil where it did
// not exist.
func AuditCommand(ctx context.Context, store authz.Audit, now time.Time, action, target string, before, after any) error {
	shown := func(v any) any {
		switch x := v.(type) {
		case authz.Key:
			return keyAt(x, now)
		case authz.Account:
			return accountOut(x)
		}
		return v
	}
	return store.AppendAudit(ctx, authz.AuditEntry{At: now.UTC(), Actor: CommandActor, Action: action, Target: target,
		Before: jsonOrNil(shown(before)), After: jsonOrNil(shown(after))})
}

// usageJSON is a usage row; the columns not grouped by are left out.
type usageJSON struct {
	Day              string `json:"day,omitempty"`
	AccountID        string `json:"account_id,omitempty"`
	KeyID            string `json:"key_id,omitempty"`
	Model            string `json:"model,omitempty"`
	Requests         int64  `json:"requests"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	TotalTokens      int64  `json:"total_tokens"`
	CachedTokens     int64  `json:"cached_tokens"`
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	// CacheWrite1hTokens of the cache writes live for an hour.
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens"`
	ReasoningTokens    int64 `json:"reasoning_tokens"`
	// Cost sums the known costs, in the configured currency, as an exact
	// decimal; UnpricedRequests counts the records whose cost is unknown
	// (no price was in effect), which Cost leaves out.
	Cost             string  `json:"cost"`
	UnpricedRequests int64   `json:"unpriced_requests"`
	AudioSeconds     float64 `json:"audio_seconds"`
	Images           int64   `json:"images"`
	// WebSearchRequests are the web searches the providers ran (and
	// bill apart from tokens).
	WebSearchRequests int64 `json:"web_search_requests"`
	// RefusedRequests were refused by the gateway (403 for a model the
	// key may not use, 429 for a rate limit or budget); FailedRequests
	// got another error.
	RefusedRequests int64 `json:"refused_requests"`
	FailedRequests  int64 `json:"failed_requests"`
}

func usageOut(u ledger.UsageRow, by ledger.UsageGrouping) usageJSON {
	out := usageJSON{AccountID: u.AccountID, KeyID: u.KeyID, Model: u.Model, Requests: u.Requests,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens, ReasoningTokens: u.ReasoningTokens, Cost: u.Cost.String(),
		UnpricedRequests: u.UnknownCost, AudioSeconds: u.Audio.Seconds(), Images: u.Images, WebSearchRequests: u.WebSearchRequests,
		RefusedRequests: u.Refused, FailedRequests: u.Failed}
	if by&ledger.ByDay != 0 {
		out.Day = u.Day.UTC().Format(time.DateOnly)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Request bodies. A field left out is left as it is; for creation, as its
// zero value.

type groupBody struct {
	Name       *string     `json:"name"`
	Models     *[]string   `json:"models"`
	Guardrails *[]string   `json:"guardrails"`
	Limits     *limitsJSON `json:"limits"`
	// Budget null removes the budget.
	Budget optional[authz.Budget] `json:"budget"`
}

func (b groupBody) apply(g *authz.Group) {
	set(&g.Name, b.Name)
	set(&g.Models, b.Models)
	set(&g.Guardrails, b.Guardrails)
	if b.Limits != nil {
		g.Limits = authz.Limits(*b.Limits)
	}
	b.Budget.apply(&g.Budget)
}

type accountBody struct {
	Name *string `json:"name"`
	// GroupID "" takes the account out of its group.
	GroupID    *string     `json:"group_id"`
	Models     *[]string   `json:"models"`
	Guardrails *[]string   `json:"guardrails"`
	Limits     *limitsJSON `json:"limits"`
	Disabled   *bool       `json:"disabled"`
	// Budget null removes the budget.
	Budget optional[authz.Budget] `json:"budget"`
}

func (b accountBody) apply(a *authz.Account) {
	b.Budget.apply(&a.Budget)
	set(&a.Name, b.Name)
	set(&a.GroupID, b.GroupID)
	set(&a.Models, b.Models)
	set(&a.Guardrails, b.Guardrails)
	set(&a.Disabled, b.Disabled)
	if b.Limits != nil {
		a.Limits = authz.Limits(*b.Limits)
	}
}

type keyBody struct {
	Name       *string   `json:"name"`
	Models     *[]string `json:"models"`
	Guardrails *[]string `json:"guardrails"`
	Disabled   *bool     `json:"disabled"`
	// ExpiresAt null clears the expiry.
	ExpiresAt optionalTime `json:"expires_at"`
	// Budget null removes the budget.
	Budget optional[authz.Budget] `json:"budget"`
}

func (b keyBody) apply(k *authz.Key) {
	b.Budget.apply(&k.Budget)
	set(&k.Name, b.Name)
	set(&k.Models, b.Models)
	set(&k.Guardrails, b.Guardrails)
	set(&k.Disabled, b.Disabled)
	if b.ExpiresAt.Set {
		k.ExpiresAt = b.ExpiresAt.Time
	}
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// optional tells a member left out (Set false) from null (V nil).
type optional[T any] struct {
	Set bool
	V   *T
}

// UnmarshalJSON implements json.Unmarshaler; it is called for null too.
func (o *optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.V = nil
		return nil
	}
	o.V = new(T)
	return json.Unmarshal(b, o.V)
}

// apply sets *dst when the member was sent.
func (o optional[T]) apply(dst **T) {
	if o.Set {
		*dst = o.V
	}
}

// optionalTime tells a time left out (Set false) from null (Time nil).
type optionalTime struct {
	Set  bool
	Time *time.Time
}

// UnmarshalJSON implements json.Unmarshaler; it is called for null too.
func (o *optionalTime) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Time = nil
		return nil
	}
	var t time.Time
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	o.Time = &t
	return nil
}
