package ledger

import (
	"time"

	"modelgate/authz/pricing"
)

// UsageRecord is one request in the usage ledger.
type UsageRecord struct {
	// ID, when set, makes appending idempotent: a record whose ID is
	// stored already is not stored again, so a batch retried after a
	// commit whose reply was lost counts once.
	ID string
	// RequestID is the gateway's own id of the request; ClientRequestID
	// the x-request-id it came with, which the client chooses.
	RequestID       string
	ClientRequestID string
	// SessionID is the agent session the request belongs to, as the
	// client names it (Claude Code's x-claude-code-session-id, Codex's
	// session_id): usage per session.
	SessionID string
	KeyID     string
	AccountID string
	Endpoint  string
	// Model is the configured model the request resolved to;
	// RequestedModel the name the client sent for it (an alias, or Model
	// itself; empty on records from before aliases), and ProviderModel
	// the provider's own id of the model the request was sent to, its
	// deployment's upstream name.
	Model            string
	RequestedModel   string
	ProviderModel    string
	Backend          string
	Status           int
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	CachedTokens     int64
	// CacheWriteTokens are the prompt tokens written to the provider's
	// prompt cache; CacheWrite1hTokens of them for an hour.
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	ReasoningTokens    int64
	// Estimated reports that the token counts are the gateway's estimate:
	// the exchange consumed tokens (it broke off, or the provider sent no
	// usage) but the provider never reported them.
	Estimated bool
	// Attempt numbers a failed attempt of a request Envoy retried on
	// another deployment (1, 2, …): its backend and status (0 when the
	// attempt got no answer: refused, reset or timed out), no tokens. Zero
	// is the request's own record; only those count as requests.
	Attempt int
	// Cost is what the request cost at the price in effect when it was
	// recorded; CostKnown is false when its model had none.
	Cost      pricing.Nanos
	CostKnown bool
	// Audio is how much audio the request transcribed; Images how many
	// images it generated.
	Audio  time.Duration
	Images int64
	// WebSearchRequests is how many web searches the provider ran for the
	// answer and bills apart from tokens.
	WebSearchRequests int64
	Duration          time.Duration
	At                time.Time
	// Guardrails are what the guardrail rules that ran did, in the order
	// they ran; empty when none ran.
	Guardrails []GuardOutcome
}

// GuardOutcome is what one guardrail rule did to a request.
type GuardOutcome struct {
	// Rule is the rule's name, as the config file names it.
	Rule string
	// Phase is "request" or "response".
	Phase string
	// Result is one of the GuardResult values below.
	Result string
}

// What a guardrail rule did (GuardOutcome.Result).
const (
	GuardAllowed     = "allowed"      // it ran and did not match
	GuardBlocked     = "blocked"      // it matched and refused the request or cut the answer
	GuardMasked      = "masked"       // it matched and masked what matched
	GuardMonitored   = "monitored"    // it matched and only recorded so
	GuardErrorOpen   = "error_open"   // its check failed and the request went on (failure: open)
	GuardErrorClosed = "error_closed" // its check failed and the request was refused (failure: closed)
)

// UsageTotals sums usage records.
type UsageTotals struct {
	Requests           int64
	PromptTokens       int64
	CompletionTokens   int64
	TotalTokens        int64
	CachedTokens       int64
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	ReasoningTokens    int64
	// Cost sums the known costs; UnknownCost counts the records whose
	// cost is unknown (no price was in effect).
	Cost              pricing.Nanos
	UnknownCost       int64
	Audio             time.Duration
	Images            int64
	WebSearchRequests int64
	// Refused counts the requests the gateway refused: a model the key
	// may not use (403) or a rate limit or budget (429). Failed counts
	// the other errors (4xx, 5xx, no answer). The rest succeeded.
	Refused, Failed int64
}

// Succeeded counts the requests that got a 2xx answer.
func (t UsageTotals) Succeeded() int64 { return t.Requests - t.Refused - t.Failed }

// UsageGrouping says which columns UsageReport groups by; zero sums
// everything into one row.
type UsageGrouping uint8

// Columns UsageReport can group by, combined with |.
const (
	// ByDay groups by UTC calendar day.
	ByDay UsageGrouping = 1 << iota
	ByAccount
	ByKey
	ByModel
)

// UsageQuery selects and groups usage records for UsageReport.
type UsageQuery struct {
	// From and To bound the records' times to [From, To); a zero To means
	// no upper bound.
	From, To time.Time
	// AccountID, KeyID and Model filter when set.
	AccountID string
	KeyID     string
	Model     string
	By        UsageGrouping
}

// UsageRow is one group of a usage report. The fields not grouped by are
// zero.
type UsageRow struct {
	// Day is midnight UTC of the day.
	Day       time.Time
	AccountID string
	KeyID     string
	Model     string
	UsageTotals
}

// RequestQuery selects requests from the usage ledger, a page at a time.
type RequestQuery struct {
	// RequestID selects one request's record.
	RequestID        string
	AccountID, KeyID string
	// Model selects the requests that resolved to it or were asked for
	// by that name: an alias finds the requests that sent it.
	Model string
	// Outcome is "ok" (2xx and 3xx), "refused" (401, 403, 429), "failed"
	// (the other errors) or empty for all.
	Outcome string
	// Guard, when set (GuardBlocked, …), returns only the requests one
	// guardrail rule at least had that result for.
	Guard string
	// BeforeAt and BeforeID, when BeforeAt is not zero, return only the
	// requests older than the one at BeforeAt with request id BeforeID:
	// the cursor of the next page.
	BeforeAt time.Time
	BeforeID string
	// Limit is the most requests returned; zero means 50.
	Limit int
}

// Capture is an exchange's bodies as payload capture kept them: the
// request as the client sent it and the answer as the client got it,
// redacted and cut at a size (Truncated).
type Capture struct {
	RequestID, AccountID, KeyID, Endpoint, Model string
	Status                                       int
	At                                           time.Time
	Request, Response                            string
	RequestTruncated, ResponseTruncated          bool
}
