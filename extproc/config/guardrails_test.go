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

// Rules are read with the parts they read (a request's user text, an
// answer's text by default), the secrets check with capture's credential
// formats; what this version does not do (guard services, masking a
// request) is a problem that says so, never a rule accepted and ignored.
func TestGuardrails(t *testing.T) {
	cfg, err := Parse([]byte(guardBase + `
guardrails:
  rules:
    - {name: no-forbidden, phase: request, regex: {patterns: ["(?i)forbidden-word"]}, action: block}
    - {name: no-keys, phase: request, regex: {patterns: ["sk-[a-z0-9]{20}"]}, action: block, failure: closed, parts: [user, tool_result, user]}
    - {name: no-zebra, phase: response, regex: {patterns: ["zebra-[0-9]+"]}, action: mask}
    - {name: secrets, phase: response, secrets: true, action: monitor, parts: [answer, arguments]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rules := cfg.Guardrails.Rules
	if len(rules) != 4 || !slices.Equal(rules[0].TextParts(), []translate.Part{translate.PartUser}) ||
		!slices.Equal(rules[1].TextParts(), []translate.Part{translate.PartUser, translate.PartToolResult}) ||
		!rules[0].Compiled()[0].MatchString("a FORBIDDEN-WORD") {
		t.Errorf("rules %+v", rules)
	}
	if !slices.Equal(rules[2].TextKinds(), []translate.TextKind{translate.TextAnswer}) ||
		!slices.Equal(rules[3].TextKinds(), []translate.TextKind{translate.TextAnswer, translate.TextArguments}) ||
		rules[3].Check() != "secrets" || !rules[3].Compiled()[0].MatchString("key sk-proj-abcdefghijklmnopqrstuvwx") {
		t.Errorf("response rules %+v", rules[2:])
	}
	if w := cfg.Guardrails.WindowOrDefault(); w.Size != DefaultGuardWindow || w.Overlap != DefaultGuardOverlap {
		t.Errorf("window %+v", w)
	}
	for _, tt := range []struct{ rules, want string }{
		{`- {phase: request, regex: {patterns: [x]}, action: block}`, "guardrails.rules[0].name: is required"},
		{`- {name: a, phase: request, regex: {patterns: ["("]}, action: block}`, "guardrails.rules[0].regex.patterns[0]: is not a regular expression: error parsing regexp: missing closing ): `(`"},
		{`- {name: a, phase: answer, regex: {patterns: [x]}, action: block}`, "guardrails.rules[0].phase: must be request or response"},
		{`- {name: a, phase: request, regex: {patterns: [x]}, action: redact}`, "guardrails.rules[0].action: must be block, mask or monitor"},
		{`- {name: a, phase: request, action: block}`, "guardrails.rules[0]: must have one check: regex, secrets or service"},
		{`- {name: a, phase: request, regex: {patterns: []}, action: block}`, "guardrails.rules[0].regex.patterns: are required"},
		{`- {name: a, phase: response, secrets: true, regex: {patterns: [x]}, action: block}`, "guardrails.rules[0]: must have one check: regex, secrets or service"},
		{`- {name: a, phase: response, service: presidio, action: block}`, `guardrails.rules[0].service: names no service: "presidio" is not in guardrails.services`},
		{"- {name: a, phase: request, service: mod, action: mask}\n  services: [{name: mod, type: openai_moderation, url: http://m, api_key_env: K}]",
			"guardrails.rules[0].action: mask needs a service that says where it found what it flags (presidio, http, bedrock_guardrail), not openai_moderation"},
		{"- {name: a, phase: request, service: p, action: mask}\n  services: [{name: p, type: presidio, url: http://p, timeout: 11s}]",
			"guardrails.services[0].timeout: must be at most Envoy's message timeout (10s): a longer check would have Envoy fail the exchange first"},
		{"- {name: a, phase: request, service: p, action: block}\n  services: [{name: p, type: presidioo, url: http://p}]",
			"guardrails.services[0].type: must be one of presidio, openai_moderation, lakera, http, azure_content_safety, azure_prompt_shields, bedrock_guardrail, model_armor, llm_judge"},
		{"- {name: a, phase: request, service: p, action: block}\n  services: [{name: p, type: lakera, url: http://p}]",
			"guardrails.services[0].api_key_env: is required: the service takes a key"},
		{"- {name: a, phase: request, service: p, action: block}\n  services: [{name: p, type: bedrock_guardrail}]",
			"guardrails.services[0]: a bedrock_guardrail needs guardrail_id, guardrail_version and region"},
		{"- {name: a, phase: request, regex: {patterns: [x]}, action: block}\n  budget: 30s",
			"guardrails.budget: must be at most Envoy's message timeout (10s): a longer check would have Envoy fail the exchange first"},
		{"- {name: a, phase: request, regex: {patterns: [x]}, action: block, optional: true, models: [nope]}",
			`guardrails.rules[0].models[0]: names no model: "nope" is not in models`},
		{`- {name: a, phase: response, regex: {patterns: [x]}, action: block, parts: [user]}`, "guardrails.rules[0].parts[0]: must be one of answer, reasoning, refusal, arguments"},
		{`- {name: a, phase: request, regex: {patterns: [x]}, action: block, parts: [tool_input]}`, "guardrails.rules[0].parts[0]: must be one of user, system, assistant, tool_result"},
		{`- {name: a, phase: request, regex: {patterns: [x]}, action: block, failure: maybe}`, "guardrails.rules[0].failure: must be closed or open"},
		{"- {name: a, phase: request, regex: {patterns: [x]}, action: block}\n    - {name: a, phase: request, regex: {patterns: [z]}, action: block}", `guardrails.rules[1].name: another rule is named "a"`},
		{"- {name: a, phase: request, regex: {patterns: [x]}, action: block}\n  window: {size: -1}", "guardrails.window.size: must be positive"},
	} {
		_, err := Parse([]byte(guardBase + "guardrails:\n  rules:\n    " + tt.rules + "\n"))
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0] != tt.want {
			t.Errorf("%s: %v, want %q", tt.rules, err, tt.want)
		}
	}
}
