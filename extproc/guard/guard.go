package guard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"modelgate/authz/pricing"
	"regexp"
	"slices"

	"modelgate/translate"
)

// Phase is when a rule runs.
type Phase uint8

const (
	// Request rules read the client's text before any of it reaches a
	// provider.
	Request Phase = iota
	// Response rules read the answer's text as it is generated, before
	// the client gets it.
	Response
)

func (p Phase) String() string {
	if p == Response {
		return "response"
	}
	return "request"
}

// Action is what a rule's match does.
type Action uint8

const (
	// Block refuses the request, or ends the answer with the client API's
	// own refusal.
	Block Action = iota
	// Mask replaces what matched (Masker) and lets the rest through.
	Mask
	// Monitor only records that the rule matched.
	Monitor
)

// Result is what one rule did to one exchange, as the ledger records it.
type Result string

// The results, strongest last: a rule that matched several times records
// the strongest.
const (
	Allowed     Result = "allowed"      // it ran and did not match
	ErrorOpen   Result = "error_open"   // its service failed, and the text went on (Open)
	Monitored   Result = "monitored"    // it matched and only recorded so
	Masked      Result = "masked"       // it matched and masked what matched
	ErrorClosed Result = "error_closed" // its service failed, and the exchange was refused (Closed)
	Blocked     Result = "blocked"      // it matched and refused the request or cut the answer
)

var strength = map[Result]int{Allowed: 1, ErrorOpen: 2, Monitored: 3, Masked: 4, ErrorClosed: 5, Blocked: 6}

// raise is r, or next when that is stronger.
func raise(r, next Result) Result {
	if strength[next] > strength[r] {
		return next
	}
	return r
}

// Failure is what a rule whose service fails does.
type Failure uint8

const (
	// Closed refuses the exchange: 503 before an answer, an error event
	// in a stream.
	Closed Failure = iota
	// Open lets the text through, and says which rule was skipped.
	Open
)

// Outcome is what one rule did to an exchange.
type Outcome struct {
	Rule   string
	Check  string // the rule's (Rule.Check)
	Phase  Phase
	Result Result
	// Cost is what the calls to the rule's service cost (Backend.Price).
	Cost pricing.Nanos
}

// callsCost is what n calls to r's service cost.
func (r *Rule) callsCost(n int) pricing.Nanos {
	if r.Backend == nil {
		return 0
	}
	return r.Backend.Price * pricing.Nanos(n)
}

// Rule is one guardrail: a check on the text of one phase, and what its
// match does.
type Rule struct {
	// Name names the rule in refusals, the ledger and the logs.
	Name string
	// Check names what the rule checks with (regex, secrets), for the
	// metrics.
	Check  string
	Phase  Phase
	Action Action
	// Patterns are the check: the rule matches where one of them
	// matches. A regular expression with a capturing group masks the
	// group's text alone (a credential after its label).
	Patterns []*regexp.Regexp
	// Backend, when set, is the check instead: a guard service.
	Backend *Backend
	// Failure is what a failing service does.
	Failure Failure
	// Parts are the parts of a request's text a request rule reads.
	Parts []translate.Part
	// Kinds are the kinds of generated text a response rule reads.
	Kinds []translate.TextKind
	// Whole: a response rule reads the answer's text whole, at its end,
	// which holds the answer until then (a check that needs all of it);
	// the others read it in windows as it streams.
	Whole bool
	// Conversation: a request rule reads the text of each part of the
	// whole conversation joined, so a match split across messages or
	// turns (a stored conversation continued) is found; otherwise each
	// message's text is read alone.
	Conversation bool
	// Optional: the rule runs only on the requests of keys, accounts or
	// groups that add it by name; the others run on every request.
	Optional bool
	// Models are the public model ids the rule runs on; empty means all.
	Models []string
}

// scoped reports a rule that runs on some requests only.
func (r *Rule) scoped() bool { return r.Optional || len(r.Models) > 0 }

// For are the rules of rules that run on a request for model whose key,
// account and group add the optional rules named, in order: rules itself
// when every rule runs on every request.
func For(rules []*Rule, model string, named []string) []*Rule {
	if !slices.ContainsFunc(rules, (*Rule).scoped) {
		return rules
	}
	out := make([]*Rule, 0, len(rules))
	for _, r := range rules {
		if (!r.Optional || slices.Contains(named, r.Name)) && (len(r.Models) == 0 || slices.Contains(r.Models, model)) {
			out = append(out, r)
		}
	}
	return out
}

// reads reports whether a response rule reads text of kind k.
func (r *Rule) reads(k translate.TextKind) bool { return slices.Contains(r.Kinds, k) }

// find calls add with every match of r's patterns in s, as [a, b) in s:
// the first capturing group's that matched, when a pattern has groups.
func (r *Rule) find(s []byte, add func(a, b int)) {
	for _, p := range r.Patterns {
		for _, m := range p.FindAllSubmatchIndex(s, -1) {
			a, b := m[0], m[1]
			for g := 2; g+1 < len(m); g += 2 {
				if m[g] >= 0 {
					a, b = m[g], m[g+1]
					break
				}
			}
			if b > a {
				add(a, b)
			}
		}
	}
}

// Masker masks the values one account's rules mask: the same value the
// same way every time (an HMAC under a key made of the gateway's key and
// the account), so an agent's history masked in one turn reads the same
// in the next, and the provider's prompt cache still matches its prefix.
// Making one costs nothing; the key is made at the first mask.
type Masker struct {
	key     []byte
	account string
}

// NewMasker is a Masker for account under key.
func NewMasker(key []byte, account string) Masker { return Masker{key: key, account: account} }

// Mask is what value becomes: "[masked:" and eight hexadecimal digits of
// its HMAC "]".
func (m Masker) Mask(value []byte) string {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(m.account))
	mac = hmac.New(sha256.New, mac.Sum(nil))
	mac.Write(value)
	return "[masked:" + hex.EncodeToString(mac.Sum(nil)[:4]) + "]"
}

// matched is the result of a match of a rule with action a.
func matched(a Action) Result {
	switch a {
	case Mask:
		return Masked
	case Monitor:
		return Monitored
	}
	return Blocked
}
