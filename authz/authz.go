package authz

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors. They know nothing of HTTP.
var (
	// ErrNotFound is returned by Store lookups that find nothing.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when creating something that already exists.
	ErrExists = errors.New("already exists")
	// ErrUnauthenticated means the presented key is unknown, malformed or
	// revoked.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrDisabled means the key or its account is disabled.
	ErrDisabled = errors.New("key or account disabled")
	// ErrUnavailable means the key store failed or did not answer in time,
	// so a presented key could be checked neither way.
	ErrUnavailable = errors.New("the key store is unavailable")
)

// Group holds accounts that share allowed models and default limits.
type Group struct {
	ID   string
	Name string
	// Models are the public model ids the group's accounts may use; empty
	// means all.
	Models []string
	// Guardrails name the optional guardrail rules of the config file
	// that run on the requests of the group's accounts besides the global
	// ones, in order and each once (as CleanGuardrails writes them); see
	// Principal.Guardrails.
	Guardrails []string
	// Limits apply to each account of the group: an account may narrow
	// them, never widen them.
	Limits Limits
	// Budget is what the group's accounts may spend together; nil means
	// none.
	Budget    *Budget
	CreatedAt time.Time
}

// Account owns keys and is what usage is charged to.
type Account struct {
	ID   string
	Name string
	// GroupID is the account's group; empty means none.
	GroupID string
	// Models narrow the group's models for this account; empty means no
	// narrowing at this level.
	Models []string
	// Guardrails name the optional guardrail rules the account adds to
	// its group's, in order and each once; see Principal.Guardrails.
	Guardrails []string
	Disabled   bool
	// Limits narrow the group's limits field by field.
	Limits Limits
	// Budget is what the account may spend, within its group's; nil means
	// none at this level.
	Budget    *Budget
	CreatedAt time.Time
}

// Limits are the rate limits set on a group or an account. A nil field is
// not set at that level (it inherits); zero allows nothing. They are data
// here: the ratelimit package enforces them.
type Limits struct {
	RequestsPerMinute  *int64
	TokensPerMinute    *int64
	TokensPerDay       *int64
	ConcurrentRequests *int64
}

// Or returns l with every unset field taken from fallback: defaults
// under explicit settings.
func (l Limits) Or(fallback Limits) Limits {
	return l.merge(fallback, func(a, _ int64) int64 { return a })
}

// Within returns the limits of an account whose own are l in a group
// whose limits are cap: field by field, the lower of the two where both
// are set, else the one set. An account narrows its group's limits and
// cannot escape them.
func (l Limits) Within(cap Limits) Limits {
	return l.merge(cap, func(a, b int64) int64 { return min(a, b) })
}

func (l Limits) merge(o Limits, both func(a, b int64) int64) Limits {
	f := func(a, b *int64) *int64 {
		switch {
		case a == nil:
			return b
		case b == nil:
			return a
		}
		return new(both(*a, *b))
	}
	return Limits{
		RequestsPerMinute:  f(l.RequestsPerMinute, o.RequestsPerMinute),
		TokensPerMinute:    f(l.TokensPerMinute, o.TokensPerMinute),
		TokensPerDay:       f(l.TokensPerDay, o.TokensPerDay),
		ConcurrentRequests: f(l.ConcurrentRequests, o.ConcurrentRequests),
	}
}

// Key is a stored API key. It never holds the secret itself.
type Key struct {
	ID        string
	AccountID string
	Name      string
	// Prefix is the visible start of the secret, for display.
	Prefix string
	// Hash is the SHA-256 of the secret.
	Hash [32]byte
	// Models are the public model ids the key may use, within its account's
	// and group's; empty means no narrowing at this level.
	Models []string
	// Guardrails name the optional guardrail rules the key adds to its
	// account's and group's, in order and each once; see
	// Principal.Guardrails.
	Guardrails []string
	Disabled   bool
	// Budget is what the key may spend, within its account's; nil means
	// none at this level.
	Budget *Budget
	// ExpiresAt is when the key stops authenticating; nil means never.
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
	// LastUsedAt is when the key last authenticated, recorded lazily: see
	// AuthenticatorConfig.LastUsedInterval for how far behind it may be.
	LastUsedAt *time.Time
}

// Principal is who an authenticated request acts as.
type Principal struct {
	KeyID       string
	KeyPrefix   string
	AccountID   string
	AccountName string
	// GroupID and GroupName are the account's group, empty if it has none.
	GroupID   string
	GroupName string
	// Models are the model ids the principal may use: the intersection of
	// the group's, the account's and the key's lists. Empty means all,
	// unless NoModels is set.
	Models []string
	// NoModels is set when the levels restrict models with nothing in
	// common, so that no model is allowed.
	NoModels bool
	// Guardrails name the optional ("named") guardrail rules of the config
	// file that run on the principal's requests besides the global ones:
	// the union of the group's, the account's and the key's lists, in that
	// order, each name once; nil when none adds any. A level only adds
	// rules: none turns a global rule off. The gateway ignores (and logs)
	// names its config does not have.
	Guardrails []string
	// Limits are the effective limits: the account's within the
	// group's.
	Limits Limits
	// KeyBudget, AccountBudget and GroupBudget are the budgets set on the
	// key, its account and the account's group (nil where none is): each
	// applies, on its own counter.
	KeyBudget, AccountBudget, GroupBudget *Budget
}

// Allows reports whether the principal may use the model.
func (p *Principal) Allows(model string) bool {
	if p.NoModels {
		return false
	}
	return len(p.Models) == 0 || slices.Contains(p.Models, model)
}

// EffectiveModels intersects model lists from the most specific level (the
// key) to the broadest (the group), an empty list restricting nothing. It
// reports none when the lists restrict and share no model, which an empty
// result alone could not tell from "all".
func EffectiveModels(levels ...[]string) (models []string, none bool) {
	restricted := false
	for _, level := range levels {
		if len(level) == 0 {
			continue
		}
		if !restricted {
			restricted = true
			models = slices.Clone(level)
			continue
		}
		models = slices.DeleteFunc(models, func(m string) bool { return !slices.Contains(level, m) })
	}
	if restricted && len(models) == 0 {
		return nil, true
	}
	return models, false
}

// UnionNames returns the names of every list, each once, in the order
// they first appear; nil when there are none.
func UnionNames(levels ...[]string) []string {
	var names []string
	for _, level := range levels {
		for _, name := range level {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// MaxGuardrailNameLen bounds, in characters, the name of a guardrail rule
// a key, account or group adds.
const MaxGuardrailNameLen = 100

// CleanGuardrails trims the names of the guardrail rules a level adds and
// drops repeats, keeping their order. Each must be 1 to
// MaxGuardrailNameLen characters without control characters or commas
// (lists of them are written comma-separated). It does not check that
// the config has the rules: the gateway ignores those it does not have.
func CleanGuardrails(names []string) ([]string, error) {
	var out []string
	for _, name := range names {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			return nil, errors.New("a guardrail rule name must not be empty")
		case utf8.RuneCountInString(name) > MaxGuardrailNameLen:
			return nil, fmt.Errorf("a guardrail rule name may have at most %d characters", MaxGuardrailNameLen)
		case strings.ContainsFunc(name, unicode.IsControl):
			return nil, fmt.Errorf("guardrail rule name %q has a control character", name)
		case strings.Contains(name, ","):
			return nil, fmt.Errorf("guardrail rule name %q has a comma, which separates names", name)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// AuditEntry is one change an admin made.
type AuditEntry struct {
	// ID orders entries: a later entry has a larger ID.
	ID int64
	At time.Time
	// Actor is who made the change: "admin API token", or "dashboard
	// session" and the session's short id.
	Actor string
	// Action is what was done, as "account.update" or "key.revoke".
	Action string
	// Target names what changed: an id, or for a price its model and
	// From.
	Target string
	// Before and After are the target's admin API JSON around the change;
	// nil where it did not exist.
	Before, After json.RawMessage
}

// AuditQuery selects audit entries.
type AuditQuery struct {
	// Before, when not zero, returns only entries with a smaller ID: the
	// cursor of the next page.
	Before int64
	// Limit is the most entries to return; zero means 50.
	Limit int
	// Target, when set, returns only entries about it.
	Target string
}
