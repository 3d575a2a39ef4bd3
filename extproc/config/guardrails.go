package config

import (
	"fmt"
	"regexp"
	"slices"

	"modelgate/translate"
)

// Guardrails are the operator's rules on the traffic, in order. This
// version takes request rules that block on a regular expression; the
// other checks, actions and the response phase are refused with a problem
// that says so, never accepted and ignored.
type Guardrails struct {
	Rules []GuardRule `json:"rules"`
}

// GuardRule is one rule.
type GuardRule struct {
	// Name names the rule in the refusal the client gets, the ledger and
	// the logs; unique.
	Name string `json:"name"`
	// Phase is when it runs: "request", on the client's text before any
	// of it reaches a provider.
	Phase string `json:"phase"`
	// Regex is the check: the rule matches when one of its patterns
	// matches the text.
	Regex *GuardRegex `json:"regex"`
	// Action is what a match does: "block" refuses the request (400
	// content_filter, in the client's API's shape).
	Action string `json:"action"`
	// Failure is what an error of the check does, "closed" or "open"; a
	// regular expression does not fail.
	Failure string `json:"failure"`
	// Parts are the parts of the client's text the rule reads: user,
	// system, assistant (earlier answers sent back), tool_result; default
	// user. Tool calls' arguments, thinking, images and files are never
	// read.
	Parts []string `json:"parts"`
}

// GuardRegex is a check by regular expressions (Go's syntax).
type GuardRegex struct {
	Patterns []string `json:"patterns"`
}

// guardPart is the part of the client's text a rule's parts name.
func guardPart(name string) (translate.Part, bool) {
	i := slices.IndexFunc(translate.Parts, func(p translate.Part) bool { return p.String() == name })
	if i < 0 {
		return 0, false
	}
	return translate.Parts[i], true
}

func (g Guardrails) validate(p *problems) {
	names := map[string]bool{}
	for i, r := range g.Rules {
		at := fmt.Sprintf("guardrails.rules[%d]", i)
		switch {
		case r.Name == "":
			p.add(at+".name", "is required")
		case names[r.Name]:
			p.add(at+".name", "another rule is named %q", r.Name)
		}
		names[r.Name] = true
		switch r.Phase {
		case "request":
		case "response":
			p.add(at+".phase", "response rules are not supported yet: this version checks requests")
		default:
			p.add(at+".phase", "must be request")
		}
		if r.Regex == nil || len(r.Regex.Patterns) == 0 {
			p.add(at+".regex.patterns", "are required: this version's check is a regular expression")
		} else {
			for j, pat := range r.Regex.Patterns {
				if _, err := regexp.Compile(pat); err != nil {
					p.add(fmt.Sprintf("%s.regex.patterns[%d]", at, j), "is not a regular expression: %v", err)
				}
			}
		}
		switch r.Action {
		case "block":
		case "mask", "monitor":
			p.add(at+".action", "%s is not supported yet: this version blocks", r.Action)
		default:
			p.add(at+".action", "must be block")
		}
		if r.Failure != "" && r.Failure != "closed" && r.Failure != "open" {
			p.add(at+".failure", "must be closed or open")
		}
		for j, part := range r.Parts {
			if _, ok := guardPart(part); !ok {
				p.add(fmt.Sprintf("%s.parts[%d]", at, j), "must be one of user, system, assistant, tool_result")
			}
		}
	}
}

// Compiled are the rule's patterns, compiled; a valid config's compile.
func (r GuardRule) Compiled() []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(r.Regex.Patterns))
	for _, pat := range r.Regex.Patterns {
		out = append(out, regexp.MustCompile(pat))
	}
	return out
}

// TextParts are the parts of the client's text the rule reads.
func (r GuardRule) TextParts() []translate.Part {
	if len(r.Parts) == 0 {
		return []translate.Part{translate.PartUser}
	}
	var out []translate.Part
	for _, name := range r.Parts {
		if part, ok := guardPart(name); ok && !slices.Contains(out, part) {
			out = append(out, part)
		}
	}
	return out
}
