package gemini

import (
	"encoding/json"
	"fmt"

	"modelgate/translate/api"
)

type part struct {
	Text             string          `json:"text,omitempty"`
	InlineData       *inlineData     `json:"inlineData,omitempty"`
	FunctionCall     *functionCall   `json:"functionCall,omitempty"`
	FunctionResponse *functionResult `json:"functionResponse,omitempty"`
	ThoughtSignature string          `json:"thoughtSignature,omitempty"`
}

type inlineData struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResult struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type functionDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

// toolDecl is a Tool: function declarations, or Google Search.
type toolDecl struct {
	FunctionDeclarations []functionDecl `json:"functionDeclarations,omitempty"`
	GoogleSearch         *struct{}      `json:"googleSearch,omitempty"`
}

type generationConfig struct {
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	MaxOutputTokens    *int64          `json:"maxOutputTokens,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	CandidateCount     *int64          `json:"candidateCount,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  int64 `json:"thinkingBudget"`
	IncludeThoughts bool  `json:"includeThoughts,omitempty"`
}

type request struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []toolDecl        `json:"tools,omitempty"`
	ToolConfig        json.RawMessage   `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

// buildRequest maps the request; webSearch: web_search_options turn
// Google Search grounding on.
func buildRequest(req *api.ChatRequest, webSearch bool) (*request, error) {
	var in api.ChatParams
	if err := req.Decode(&in); err != nil {
		return nil, err
	}
	out := &request{}
	if err := out.setContents(in.Messages); err != nil {
		return nil, err
	}
	if err := out.setTools(in); err != nil {
		return nil, err
	}
	if in.WebSearchOptions != nil && webSearch {
		out.Tools = append(out.Tools, toolDecl{GoogleSearch: &struct{}{}})
	}
	gc, err := generation(in)
	out.GenerationConfig = gc
	return out, err
}

func (r *request) setContents(msgs []api.ChatMessage) error {
	names := map[string]string{} // tool call id → function name, for functionResponse
	var system []part
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			text, err := api.TextContent(param, m.Content)
			if err != nil {
				return err
			}
			system = append(system, part{Text: text})
		case "user":
			parts, err := userParts(param, m.Content)
			if err != nil {
				return err
			}
			r.add("user", parts)
		case "assistant":
			parts, err := modelParts(param, m, names)
			if err != nil {
				return err
			}
			r.add("model", parts)
		case "tool":
			text, err := api.TextContent(param, m.Content)
			if err != nil {
				return err
			}
			name, ok := names[m.ToolCallID]
			if !ok {
				return api.Invalid(param+".tool_call_id", "No earlier assistant tool call has the id '%s'.", m.ToolCallID)
			}
			r.add("user", []part{{FunctionResponse: &functionResult{Name: name, Response: map[string]any{"result": text}}}})
		default:
			return api.Invalid(param+".role", "Gemini models do not take '%s' messages.", m.Role)
		}
	}
	if len(system) > 0 {
		r.SystemInstruction = &content{Parts: system}
	}
	if len(r.Contents) == 0 {
		return api.Invalid("messages", "Gemini models need at least one user or assistant message.")
	}
	return nil
}

func (r *request) add(role string, parts []part) {
	if len(parts) == 0 {
		return
	}
	if n := len(r.Contents); n > 0 && r.Contents[n-1].Role == role {
		r.Contents[n-1].Parts = append(r.Contents[n-1].Parts, parts...)
		return
	}
	r.Contents = append(r.Contents, content{Role: role, Parts: parts})
}

func userParts(param string, raw json.RawMessage) ([]part, error) {
	parts, err := api.Parts(param, raw)
	if err != nil {
		return nil, err
	}
	var out []part
	for j, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, part{Text: p.Text})
		case "image_url":
			data, err := dataURI(fmt.Sprintf("%s.content[%d].image_url.url", param, j), p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			out = append(out, part{InlineData: data})
		case "file":
			mime, data, err := p.FileData(fmt.Sprintf("%s.content[%d]", param, j))
			if err != nil {
				return nil, err
			}
			out = append(out, part{InlineData: &inlineData{MimeType: mime, Data: data}})
		default:
			return nil, api.Invalid(fmt.Sprintf("%s.content[%d].type", param, j), "Gemini models do not take '%s' parts here.", p.Type)
		}
	}
	return out, nil
}

// dataURI accepts base64 data URIs only: the Gemini API takes no http URLs
// for images, and the gateway does not fetch them.
func dataURI(param, url string) (*inlineData, error) {
	mime, data, ok := api.DataURI(url)
	if !ok {
		return nil, api.Invalid(param, "Gemini models take images as base64 data URIs (data:<media type>;base64,<data>), not URLs.")
	}
	return &inlineData{MimeType: mime, Data: data}, nil
}

func modelParts(param string, m api.ChatMessage, names map[string]string) ([]part, error) {
	var out []part
	if len(m.Content) > 0 && string(m.Content) != "null" {
		text, err := api.TextContent(param, m.Content)
		if err != nil {
			return nil, err
		}
		if text != "" {
			out = append(out, part{Text: text})
		}
	}
	for j, tc := range m.ToolCalls {
		args, err := api.ToolArguments(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, j), tc.Function.Arguments)
		if err != nil {
			return nil, err
		}
		names[tc.ID] = tc.Function.Name
		out = append(out, part{FunctionCall: &functionCall{Name: tc.Function.Name, Args: args}, ThoughtSignature: signatureFromID(tc.ID)})
	}
	return out, nil
}

func (r *request) setTools(in api.ChatParams) error {
	var decls []functionDecl
	for i, t := range in.Tools {
		if t.Type != "function" {
			return api.Invalid(fmt.Sprintf("tools[%d].type", i), "Only function tools are supported, got '%s'.", t.Type)
		}
		decls = append(decls, functionDecl{Name: t.Function.Name, Description: t.Function.Description, ParametersJSONSchema: t.Function.Parameters})
	}
	if len(decls) > 0 {
		r.Tools = []toolDecl{{FunctionDeclarations: decls}}
	}
	return r.setToolConfig(in.ToolChoice)
}

func (r *request) setToolConfig(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	cfg := map[string]any{}
	var s string
	switch {
	case json.Unmarshal(raw, &s) == nil:
		mode := map[string]string{"auto": "AUTO", "none": "NONE", "required": "ANY"}[s]
		if mode == "" {
			return api.Invalid("tool_choice", "Invalid 'tool_choice': '%s'.", s)
		}
		cfg["mode"] = mode
	default:
		var named struct {
			Function struct{ Name string } `json:"function"`
		}
		if json.Unmarshal(raw, &named) != nil || named.Function.Name == "" {
			return api.Invalid("tool_choice", "Invalid 'tool_choice'.")
		}
		cfg["mode"], cfg["allowedFunctionNames"] = "ANY", []string{named.Function.Name}
	}
	b, err := json.Marshal(map[string]any{"functionCallingConfig": cfg})
	r.ToolConfig = b
	return err
}

func generation(in api.ChatParams) (*generationConfig, error) {
	gc := &generationConfig{Temperature: in.Temperature, TopP: in.TopP, CandidateCount: in.N}
	gc.MaxOutputTokens = in.MaxCompletionTokens
	if gc.MaxOutputTokens == nil {
		gc.MaxOutputTokens = in.MaxTokens
	}
	stop, err := api.StopSequences(in.Stop)
	if err != nil {
		return nil, err
	}
	gc.StopSequences = stop
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_object":
			gc.ResponseMimeType = "application/json"
		case "json_schema":
			gc.ResponseMimeType, gc.ResponseJSONSchema = "application/json", rf.JSONSchema.Schema
		}
	}
	budget, ok := thinkingBudget(in.ReasoningEffort)
	if !ok {
		return nil, api.Invalid("reasoning_effort", "Invalid 'reasoning_effort': '%s'.", in.ReasoningEffort)
	}
	if in.ReasoningEffort != "" {
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: budget, IncludeThoughts: budget != 0}
	}
	return gc, nil
}

// thinkingBudget maps reasoning_effort to Gemini's thinking budget.
func thinkingBudget(effort string) (int64, bool) {
	switch effort {
	case "":
		return 0, true
	case "none":
		return 0, true
	case "minimal":
		return 512, true
	case "low":
		return 1024, true
	case "medium":
		return 8192, true
	case "high":
		return 24576, true
	}
	return 0, false
}
