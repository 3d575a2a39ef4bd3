package extproc

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/translate/api"
)

// entry is a model as GET /v1/models lists it: under id (the model's, or
// an alias's), what it can do as far as it is known, and its price.
type entry struct {
	id string
	m  *routing.Model
	// input are the kinds of input it reads, nil when undeclared; has
	// reports the other capabilities (true when undeclared: the gateway
	// passes such requests on).
	input                       []string
	tools, jsonSchema, thinking bool
	contextWindow, maxOutput    int64
	efforts                     []string
	price                       *pricing.Price
}

// entry is what the catalog says of model m under id: for an auto model,
// what any of its candidates can do, the largest window and output, and
// no price (it is its candidate's).
func (s *Server) entry(id string, m *routing.Model, now time.Time) entry {
	e := entry{id: id, m: m}
	models := []*routing.Model{m}
	if m.Auto != nil {
		models = models[:0]
		for _, c := range m.Auto.Candidates {
			models = append(models, s.router.models[c])
		}
	} else if p, ok := s.cfg.Prices.At(m.ID, now); ok {
		e.price = &p
	}
	undeclared := false
	for _, c := range models {
		e.tools = e.tools || !s.router.lacks(c, api.CapTools)
		e.jsonSchema = e.jsonSchema || !s.router.lacks(c, api.CapJSONSchema)
		e.thinking = e.thinking || !s.router.lacks(c, api.CapReasoning)
		e.contextWindow = max(e.contextWindow, int64(c.ContextWindow))
		e.maxOutput = max(e.maxOutput, c.Capabilities.MaxOutput)
		for _, ef := range c.ReasoningEfforts {
			if !slices.Contains(e.efforts, ef) {
				e.efforts = append(e.efforts, ef)
			}
		}
		undeclared = undeclared || len(c.Capabilities.Input) == 0
		for _, in := range c.Capabilities.Input {
			if !slices.Contains(e.input, in) {
				e.input = append(e.input, in)
			}
		}
	}
	if undeclared { // one reads what its provider does: the union is unknown
		e.input = nil
	}
	return e
}

// catalog is what GET /v1/models lists for the principal: the models it
// may use, in the config's order, each followed by its listed aliases.
func (s *Server) catalog(p *authz.Principal) []entry {
	now := s.now()
	var out []entry
	for _, m := range s.router.order {
		if !p.Allows(m.ID) {
			continue
		}
		out = append(out, s.entry(m.ID, m, now))
		for _, a := range m.Listed {
			out = append(out, s.entry(a, m, now))
		}
	}
	return out
}

// listModels renders the principal's catalog in the dialect's shape.
func (s *Server) listModels(p *authz.Principal, d *dialect) []byte {
	return render(d.list(s.catalog(p)))
}

// getModel renders the entry of the model a name resolves to, under that
// name, when the principal may use it: a client may look up the name it
// sends, listed or not.
func (s *Server) getModel(p *authz.Principal, name string, d *dialect) ([]byte, bool) {
	m, _ := s.router.resolve(name)
	if m == nil || !p.Allows(m.ID) {
		return nil, false
	}
	return render(d.model(s.entry(name, m, s.now()))), true
}

// modelObject is the specification's Model, with members of the
// gateway's own and of OpenRouter's model list, which clients that size
// their context, offer efforts and pick a model read: the context window
// in tokens, the reasoning efforts, the input kinds, the parameters it
// takes, the price per token and, for an auto model, its candidates.
type modelObject struct {
	ID                  string        `json:"id"`
	Object              string        `json:"object"`
	Created             int64         `json:"created"`
	OwnedBy             string        `json:"owned_by"`
	ContextWindow       int64         `json:"context_window,omitempty"`
	ContextLength       int64         `json:"context_length,omitempty"`
	ReasoningEfforts    []string      `json:"reasoning_efforts,omitempty"`
	Architecture        *architecture `json:"architecture,omitempty"`
	TopProvider         *topProvider  `json:"top_provider,omitempty"`
	Pricing             *tokenPrices  `json:"pricing,omitempty"`
	SupportedParameters []string      `json:"supported_parameters"`
	Auto                *autoObject   `json:"auto,omitempty"`
}

type architecture struct {
	InputModalities  []string `json:"input_modalities"`
	OutputModalities []string `json:"output_modalities"`
}

type topProvider struct {
	MaxCompletionTokens int64 `json:"max_completion_tokens"`
}

// tokenPrices are prices per token in the configured currency, as
// decimal strings (OpenRouter's pricing).
type tokenPrices struct {
	Prompt     string `json:"prompt"`
	Completion string `json:"completion"`
}

type autoObject struct {
	Candidates []string `json:"candidates"`
	Prefer     string   `json:"prefer"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func modelOf(e entry) modelObject {
	o := modelObject{ID: e.id, Object: "model", Created: e.m.Created, OwnedBy: e.m.OwnedBy,
		ContextWindow: e.contextWindow, ContextLength: e.contextWindow, ReasoningEfforts: e.efforts,
		SupportedParameters: []string{"max_tokens"}}
	if e.input != nil {
		o.Architecture = &architecture{InputModalities: e.input, OutputModalities: []string{"text"}}
	}
	if e.maxOutput > 0 {
		o.TopProvider = &topProvider{MaxCompletionTokens: e.maxOutput}
	}
	if e.price != nil {
		o.Pricing = &tokenPrices{Prompt: perToken(e.price.Input), Completion: perToken(e.price.Output)}
	}
	if e.tools {
		o.SupportedParameters = append(o.SupportedParameters, "tools", "tool_choice")
	}
	if e.jsonSchema {
		o.SupportedParameters = append(o.SupportedParameters, "response_format", "structured_outputs")
	}
	if e.thinking {
		o.SupportedParameters = append(o.SupportedParameters, "reasoning", "reasoning_effort")
	}
	if a := e.m.Auto; a != nil {
		o.Auto = &autoObject{Candidates: a.Candidates, Prefer: a.Prefer}
	}
	return o
}

// perToken is a price per million tokens as a decimal per token: nanos
// per million tokens are units times 10^-15 per token.
func perToken(n pricing.Nanos) string {
	const shift = 15
	digits := strconv.FormatInt(int64(n), 10)
	if len(digits) <= shift {
		digits = strings.Repeat("0", shift-len(digits)+1) + digits
	}
	s := digits[:len(digits)-shift] + "." + digits[len(digits)-shift:]
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// anthropicModel is a model as the Messages API's GET /v1/models lists
// it, with its limits and capabilities (ModelInfo).
type anthropicModel struct {
	Type           string             `json:"type"`
	ID             string             `json:"id"`
	DisplayName    string             `json:"display_name"`
	CreatedAt      string             `json:"created_at"`
	MaxInputTokens *int64             `json:"max_input_tokens"`
	MaxTokens      *int64             `json:"max_tokens"`
	Capabilities   anthropicModelCaps `json:"capabilities"`
}

// anthropicModelCaps are the Models API's capabilities. What the gateway
// never enables (batches, code execution) is unsupported; what is not
// declared is supported, as the gateway passes it on.
type anthropicModelCaps struct {
	Batch             supported     `json:"batch"`
	Citations         supported     `json:"citations"`
	CodeExecution     supported     `json:"code_execution"`
	ContextManagement supported     `json:"context_management"`
	Effort            effortSupport `json:"effort"`
	ImageInput        supported     `json:"image_input"`
	PDFInput          supported     `json:"pdf_input"`
	StructuredOutputs supported     `json:"structured_outputs"`
	Thinking          thinking      `json:"thinking"`
}

type supported struct {
	Supported bool `json:"supported"`
}

type effortSupport struct {
	Supported bool      `json:"supported"`
	Low       supported `json:"low"`
	Medium    supported `json:"medium"`
	High      supported `json:"high"`
	Max       supported `json:"max"`
}

type thinking struct {
	Supported bool          `json:"supported"`
	Types     thinkingTypes `json:"types"`
}

type thinkingTypes struct {
	Adaptive supported `json:"adaptive"`
	Enabled  supported `json:"enabled"`
}

// anthropicModelList is the Messages API's model list: one page.
type anthropicModelList struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

func anthropicModelOf(e entry) anthropicModel {
	reads := func(kind string) supported { return supported{e.input == nil || slices.Contains(e.input, kind)} }
	effort := func(level string) supported { return supported{slices.Contains(e.efforts, level)} }
	o := anthropicModel{Type: "model", ID: e.id, DisplayName: e.id, CreatedAt: time.Unix(e.m.Created, 0).UTC().Format(time.RFC3339),
		Capabilities: anthropicModelCaps{
			Citations: supported{true}, ContextManagement: supported{true},
			Effort: effortSupport{Supported: len(e.efforts) > 0, Low: effort("low"), Medium: effort("medium"), High: effort("high"),
				Max: effort("xhigh")},
			ImageInput: reads("image"), PDFInput: reads("file"), StructuredOutputs: supported{e.jsonSchema},
			Thinking: thinking{Supported: e.thinking, Types: thinkingTypes{Adaptive: supported{e.thinking}, Enabled: supported{e.thinking}}},
		}}
	if e.contextWindow > 0 {
		o.MaxInputTokens = &e.contextWindow
	}
	if e.maxOutput > 0 {
		o.MaxTokens = &e.maxOutput
	}
	return o
}
