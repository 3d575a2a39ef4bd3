package config

import (
	"errors"
	"slices"
	"testing"

	"modelgate/translate"
)

const guardBase = `
backends:
  - {name: openai, provider: openai, base_url: https://api.openai.com}
models:
  - {id: m, deployments: [{backend: openai, model: gpt-4o}]}
`

// Request rules that block on a regular expression are read with the
// parts they read (user text by default); what this version does not do
// is a problem that says so, never a rule accepted and ignored.
func TestGuardrails(t *testing.T) {
	cfg, err := Parse([]byte(guardBase + `
guardrails:
  rules:
    - {name: no-forbidden, phase: request, regex: {patterns: ["(?i)forbidden-word"]}, action: block}
    - {name: no-keys, phase: request, regex: {patterns: ["sk-[a-z0-9]{20}"]}, action: block, failure: closed, parts: [user, tool_result, user]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rules := cfg.Guardrails.Rules
	if len(rules) != 2 || !slices.Equal(rules[0].TextParts(), []translate.Part{translate.PartUser}) ||
		!slices.Equal(rules[1].TextParts(), []translate.Part{translate.PartUser, translate.PartToolResult}) ||
		!rules[0].Compiled()[0].MatchString("a FORBIDDEN-WORD") {
		t.Errorf("rules %+v", rules)
	}
	for _, tt := range []struct{ rules, want string }{
		{`- {phase: request, regex: {patterns: [x]}, action: block}`, "guardrails.rules[0].name: is required"},
		{`- {name: a, phase: request, regex: {patterns: ["("]}, action: block}`, "guardrails.rules[0].regex.patterns[0]: is not a regular expression: error parsing regexp: missing closing ): `(`"},
		{`- {name: a, phase: response, regex: {patterns: [x]}, action: block}`, "guardrails.rules[0].phase: response rules are not supported yet: this version checks requests"},
		{`- {name: a, phase: request, regex: {patterns: [x]}, action: mask}`, "guardrails.rules[0].action: mask is not supported yet: this version blocks"},
		{`- {name: a, phase: request, action: block}`, "guardrails.rules[0].regex.patterns: are required: this version's check is a regular expression"},
		{`- {name: a, phase: request, regex: {patterns: [x]}, action: block, parts: [tool_input]}`, "guardrails.rules[0].parts[0]: must be one of user, system, assistant, tool_result"},
		{`- {name: a, phase: request, regex: {patterns: [x]}, action: block, failure: maybe}`, "guardrails.rules[0].failure: must be closed or open"},
		{"- {name: a, phase: request, regex: {patterns: [x]}, action: block}\n    - {name: a, phase: request, regex: {patterns: [z]}, action: block}", `guardrails.rules[1].name: another rule is named "a"`},
	} {
		_, err := Parse([]byte(guardBase + "guardrails:\n  rules:\n    " + tt.rules + "\n"))
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0] != tt.want {
			t.Errorf("%s: %v, want %q", tt.rules, err, tt.want)
		}
	}
}
