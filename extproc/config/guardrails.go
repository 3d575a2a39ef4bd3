package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"modelgate/authz/pricing"
	"modelgate/extproc/redact"
	"modelgate/translate"
)

// Guardrails are the operator's rules on the traffic, in order. What this
// version does not do yet (guard services, masking a request) is refused
// with a problem that says so, never accepted and ignored.
type Guardrails struct {
	// Services are the guard services rules may check with.
	Services []GuardService `json:"services"`
	Rules    []GuardRule    `json:"rules"`
	// Budget bounds the checks of one phase (a request's, a window of an
	// answer), the services asked at once; default 2s, at most Envoy's
	// message timeout.
	Budget Duration `json:"budget"`
	// Window is how a streamed answer is checked; see GuardWindow.
	Window GuardWindow `json:"window"`
	// MaskKeyEnv names the environment variable holding the key masks
	// are made with (at least 32 characters): replicas must share it for
	// a value to mask the same way on each. Unset means a random key per
	// process.
	MaskKeyEnv string `json:"mask_key_env"`
}

// GuardWindow is how a streamed answer is checked: its text is read once
// Size characters of it arrived unchecked, and the last Overlap
// characters read are held until the next read, so a match no longer
// than Overlap never reaches the client in part. Defaults: 128 and 64.
type GuardWindow struct {
	Size    int `json:"size"`
	Overlap int `json:"overlap"`
}

// Defaults of GuardWindow.
const (
	DefaultGuardWindow  = 128
	DefaultGuardOverlap = 64
)

// GuardRule is one rule.
type GuardRule struct {
	// Name names the rule in the refusal the client gets, the ledger and
	// the logs; unique.
	Name string `json:"name"`
	// Phase is when it runs: "request", on the client's text before any
	// of it reaches a provider; "response", on the answer's text before
	// the client gets it.
	Phase string `json:"phase"`
	// Regex and Secrets are the checks, one per rule: the rule matches
	// where one of Regex's patterns matches, or where the credential
	// formats payload capture hides are (Secrets: true).
	Regex   *GuardRegex `json:"regex"`
	Secrets bool        `json:"secrets"`
	// Service names a guard service; not supported yet.
	Service string `json:"service"`
	// Action is what a match does: "block" refuses the request (400
	// content_filter) or ends the answer with its API's refusal; "mask"
	// replaces what matched in the answer; "monitor" records the match in
	// the ledger and changes nothing.
	Action string `json:"action"`
	// Failure is what an error of the check does, "closed" or "open"; a
	// regular expression does not fail.
	Failure string `json:"failure"`
	// Whole: a response rule reads the answer's text whole, at its end,
	// holding the answer until then.
	Whole bool `json:"whole"`
	// Conversation: a request rule reads each part's text of the whole
	// conversation joined (a stored one a Responses request continues
	// included), so a match split across messages or turns is found.
	Conversation bool `json:"conversation"`
	// Optional rules run only on the requests of keys, accounts or
	// groups that add them by name (their guardrails lists); the others
	// run on every request, and nothing turns them off.
	Optional bool `json:"optional"`
	// Models are the model ids (of models:) the rule runs on; empty
	// means every model.
	Models []string `json:"models"`
	// Parts are the parts of the text the rule reads. A request rule:
	// user, system, assistant (earlier answers sent back), tool_result;
	// default user. A response rule: answer, reasoning, refusal,
	// arguments (of the tool calls the model makes); default answer.
	// Images, files, thinking signatures and encrypted reasoning are
	// never read.
	Parts []string `json:"parts"`
}

// GuardService is a guard service, by its contract (Type); see
// docs/guardrails.md for each contract's fields.
type GuardService struct {
	// Name is what rules call it; unique.
	Name string `json:"name"`
	// Type is its contract: presidio, openai_moderation, lakera, http,
	// azure_content_safety, azure_prompt_shields, bedrock_guardrail,
	// model_armor, llm_judge.
	Type string `json:"type"`
	// URL is its base URL (http: the whole endpoint; llm_judge: an
	// OpenAI base URL ending in /v1); Bedrock's and Model Armor's default
	// to their regional endpoints.
	URL string `json:"url"`
	// APIKeyEnv names the environment variable holding its key.
	APIKeyEnv string `json:"api_key_env"`
	// Timeout bounds each call; default 2s, at most Envoy's message
	// timeout. MaxConcurrency bounds the calls at once; default 64.
	Timeout        Duration `json:"timeout"`
	MaxConcurrency int      `json:"max_concurrency"`
	// PricePerCall is what one call costs, in prices.currency (a decimal
	// such as "0.0015"), added to the request's cost and budgets.
	PricePerCall string `json:"price_per_call"`
	// Presidio: the language (default en), the entities, the lowest
	// score that counts.
	Language       string   `json:"language"`
	Entities       []string `json:"entities"`
	ScoreThreshold float64  `json:"score_threshold"`
	// Model is OpenAI moderation's (default omni-moderation-latest) and
	// the LLM judge's.
	Model string `json:"model"`
	// Bedrock ApplyGuardrail: the guardrail, its version, the region, and
	// the credentials' variables (default AWS_ACCESS_KEY_ID and so on).
	GuardrailID           string `json:"guardrail_id"`
	GuardrailVersion      string `json:"guardrail_version"`
	Region                string `json:"region"`
	AWSAccessKeyIDEnv     string `json:"aws_access_key_id_env"`
	AWSSecretAccessKeyEnv string `json:"aws_secret_access_key_env"`
	AWSSessionTokenEnv    string `json:"aws_session_token_env"`
	// SeverityThreshold is Azure AI Content Safety's lowest flagging
	// severity (0, 2, 4, 6); default 4.
	SeverityThreshold int `json:"severity_threshold"`
	// Model Armor: the template (projects/P/locations/L/templates/T) and
	// the variable holding a service account's JSON key.
	Template          string `json:"template"`
	ServiceAccountEnv string `json:"service_account_env"`
	// ProjectID is Lakera Guard's project, whose policy applies.
	ProjectID string `json:"project_id"`
}

// guardServiceTypes are the contracts, and whether each says where in
// the text it found what it flags (so a rule can mask with it).
var guardServiceTypes = map[string]bool{"presidio": true, "http": true, "bedrock_guardrail": true,
	"openai_moderation": false, "lakera": false, "azure_content_safety": false, "azure_prompt_shields": false,
	"model_armor": false, "llm_judge": false}

// Defaults of a guard service and of the phase budget.
const (
	DefaultGuardTimeout     = 2 * time.Second
	DefaultGuardConcurrency = 64
	DefaultGuardBudget      = 2 * time.Second
)

func (s GuardService) validate(p *problems, at string, messageTimeout time.Duration) {
	_, known := guardServiceTypes[s.Type]
	if !known {
		p.add(at+".type", "must be one of presidio, openai_moderation, lakera, http, azure_content_safety, azure_prompt_shields, bedrock_guardrail, model_armor, llm_judge")
	}
	if s.Timeout.Duration < 0 || s.Timeout.Duration > messageTimeout {
		p.add(at+".timeout", "must be at most Envoy's message timeout (%v): a longer check would have Envoy fail the exchange first", messageTimeout)
	}
	if s.MaxConcurrency < 0 {
		p.add(at+".max_concurrency", "must be positive")
	}
	if _, err := s.Price(); err != nil {
		p.add(at+".price_per_call", "%v", err)
	}
	switch s.Type {
	case "bedrock_guardrail":
		if s.GuardrailID == "" || s.GuardrailVersion == "" || s.Region == "" {
			p.add(at, "a bedrock_guardrail needs guardrail_id, guardrail_version and region")
		}
	case "model_armor":
		if s.Template == "" || s.ServiceAccountEnv == "" {
			p.add(at, "a model_armor service needs template and service_account_env")
		}
	case "presidio", "http":
		if s.URL == "" {
			p.add(at+".url", "is required")
		}
	default:
		if s.URL == "" && known {
			p.add(at+".url", "is required")
		}
		if s.APIKeyEnv == "" && known {
			p.add(at+".api_key_env", "is required: the service takes a key")
		}
	}
	if s.Type == "llm_judge" && s.Model == "" {
		p.add(at+".model", "is required: the model that judges")
	}
}

// Price is what one call costs; zero when no price is set.
func (s GuardService) Price() (pricing.Nanos, error) {
	if s.PricePerCall == "" {
		return 0, nil
	}
	return pricing.ParseAmount(s.PricePerCall)
}

// TimeoutOrDefault is the service's timeout, its default applied.
func (s GuardService) TimeoutOrDefault() time.Duration {
	if s.Timeout.Duration == 0 {
		return DefaultGuardTimeout
	}
	return s.Timeout.Duration
}

// ConcurrencyOrDefault is the service's bound on calls at once, its
// default applied.
func (s GuardService) ConcurrencyOrDefault() int {
	if s.MaxConcurrency == 0 {
		return DefaultGuardConcurrency
	}
	return s.MaxConcurrency
}

// BudgetOrDefault is the phase budget, its default applied.
func (g Guardrails) BudgetOrDefault() time.Duration {
	if g.Budget.Duration == 0 {
		return DefaultGuardBudget
	}
	return g.Budget.Duration
}

// GuardRegex is a check by regular expressions (Go's syntax).
type GuardRegex struct {
	Patterns []string `json:"patterns"`
}

// guardPart is the part of a request's text a request rule's parts name.
func guardPart(name string) (translate.Part, bool) {
	i := slices.IndexFunc(translate.Parts, func(p translate.Part) bool { return p.String() == name })
	if i < 0 {
		return 0, false
	}
	return translate.Parts[i], true
}

// guardKind is the kind of generated text a response rule's parts name.
func guardKind(name string) (translate.TextKind, bool) {
	for k := translate.TextAnswer; k <= translate.TextArguments; k++ {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

func (g Guardrails) validate(p *problems, models []Model, messageTimeout time.Duration) {
	services := map[string]string{}
	for i, s := range g.Services {
		at := fmt.Sprintf("guardrails.services[%d]", i)
		switch _, dup := services[s.Name]; {
		case s.Name == "":
			p.add(at+".name", "is required")
		case dup:
			p.add(at+".name", "another service is named %q", s.Name)
		}
		services[s.Name] = s.Type
		s.validate(p, at, messageTimeout)
	}
	if g.Budget.Duration < 0 || g.Budget.Duration > messageTimeout || g.Budget.Duration == 0 && DefaultGuardBudget > messageTimeout {
		p.add("guardrails.budget", "must be at most Envoy's message timeout (%v): a longer check would have Envoy fail the exchange first", messageTimeout)
	}
	names := map[string]bool{}
	for i, r := range g.Rules {
		at := fmt.Sprintf("guardrails.rules[%d]", i)
		r.validate(p, at, names)
		if r.Service != "" {
			switch typ, ok := services[r.Service]; {
			case !ok:
				p.add(at+".service", "names no service: %q is not in guardrails.services", r.Service)
			case r.Action == "mask" && !guardServiceTypes[typ]:
				p.add(at+".action", "mask needs a service that says where it found what it flags (presidio, http, bedrock_guardrail), not %s", typ)
			}
		}
		for j, id := range r.Models {
			if !slices.ContainsFunc(models, func(m Model) bool { return m.ID == id }) {
				p.add(fmt.Sprintf("%s.models[%d]", at, j), "names no model: %q is not in models", id)
			}
		}
	}
	if g.Window.Size < 0 {
		p.add("guardrails.window.size", "must be positive")
	}
	if g.Window.Overlap < 0 {
		p.add("guardrails.window.overlap", "must be positive")
	}
}

func (r GuardRule) validate(p *problems, at string, names map[string]bool) {
	switch {
	case r.Name == "":
		p.add(at+".name", "is required")
	case names[r.Name]:
		p.add(at+".name", "another rule is named %q", r.Name)
	case len(r.Name) > 100 || strings.ContainsFunc(r.Name, unicode.IsControl):
		p.add(at+".name", "must be at most 100 characters, without control characters: it is sent in headers and shown on the dashboard")
	case r.Optional && strings.ContainsRune(r.Name, ','):
		p.add(at+".name", "an optional rule's name has no comma: keys, accounts and groups list the rules they add separated by commas")
	}
	names[r.Name] = true
	request := r.Phase == "request"
	if !request && r.Phase != "response" {
		p.add(at+".phase", "must be request or response")
	}
	checks := 0
	if r.Regex != nil {
		checks++
		if len(r.Regex.Patterns) == 0 {
			p.add(at+".regex.patterns", "are required")
		}
		for j, pat := range r.Regex.Patterns {
			if _, err := regexp.Compile(pat); err != nil {
				p.add(fmt.Sprintf("%s.regex.patterns[%d]", at, j), "is not a regular expression: %v", err)
			}
		}
	}
	if r.Secrets {
		checks++
	}
	if r.Service != "" {
		checks++
	}
	if checks != 1 {
		p.add(at, "must have one check: regex, secrets or service")
	}
	switch r.Action {
	case "block", "monitor":
	case "mask":
	default:
		p.add(at+".action", "must be block, mask or monitor")
	}
	if r.Whole && request {
		p.add(at+".whole", "is for response rules: a request rule reads the whole request")
	}
	if r.Conversation && !request {
		p.add(at+".conversation", "is for request rules: a response rule reads the answer as it is generated")
	}
	if r.Failure != "" && r.Failure != "closed" && r.Failure != "open" {
		p.add(at+".failure", "must be closed or open")
	}
	for j, part := range r.Parts {
		_, isPart := guardPart(part)
		_, isKind := guardKind(part)
		switch {
		case request && !isPart:
			p.add(fmt.Sprintf("%s.parts[%d]", at, j), "must be one of user, system, assistant, tool_result")
		case !request && !isKind:
			p.add(fmt.Sprintf("%s.parts[%d]", at, j), "must be one of answer, reasoning, refusal, arguments")
		}
	}
}

// Compiled are the rule's patterns, compiled; a valid config's compile.
// The secrets check's are the credential formats capture hides.
func (r GuardRule) Compiled() []*regexp.Regexp {
	if r.Secrets {
		return []*regexp.Regexp{redact.SecretPattern()}
	}
	out := make([]*regexp.Regexp, 0, len(r.Regex.Patterns))
	for _, pat := range r.Regex.Patterns {
		out = append(out, regexp.MustCompile(pat))
	}
	return out
}

// Check names the rule's check: regex, secrets or service.
func (r GuardRule) Check() string {
	switch {
	case r.Secrets:
		return "secrets"
	case r.Service != "":
		return "service"
	}
	return "regex"
}

// TextParts are the parts of a request's text a request rule reads.
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

// TextKinds are the kinds of generated text a response rule reads.
func (r GuardRule) TextKinds() []translate.TextKind {
	if len(r.Parts) == 0 {
		return []translate.TextKind{translate.TextAnswer}
	}
	var out []translate.TextKind
	for _, name := range r.Parts {
		if k, ok := guardKind(name); ok && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// WindowOrDefault is the window with its defaults applied.
func (g Guardrails) WindowOrDefault() GuardWindow {
	w := g.Window
	if w.Size == 0 {
		w.Size = DefaultGuardWindow
	}
	if w.Overlap == 0 {
		w.Overlap = DefaultGuardOverlap
	}
	return w
}
