package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"modelgate/translate/api"
)

// Version is the anthropic-version header the translator speaks.
const Version = "2023-06-01"

// DefaultMaxTokens is sent when the client sets no limit: Anthropic
// requires max_tokens.
const DefaultMaxTokens = 4096

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is an Anthropic content block; only the members of its type are set.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []block         `json:"content,omitempty"`
	// Title is a document block's.
	Title string `json:"title,omitempty"`
	// CacheControl is the client's prompt caching marker, as sent (with
	// its ttl).
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	// Thinking and Signature are a thinking block's, Data a redacted
	// thinking block's.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// tool is a client tool (name, description, input schema) or one
// Anthropic runs (type, name and its settings): web search.
type tool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	UserLocation *userLocation   `json:"user_location,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// userLocation is where web search results are local to.
type userLocation struct {
	Type string `json:"type"`
	api.Location
}

// webSearchTool is the version of Anthropic's web search tool sent.
const webSearchTool = "web_search_20250305"

type request struct {
	Model string `json:"model"`
	// System is a string, or text blocks when one carries a cache marker.
	System        json.RawMessage `json:"system,omitempty"`
	Messages      []message       `json:"messages"`
	MaxTokens     int64           `json:"max_tokens"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    json.RawMessage `json:"tool_choice,omitempty"`
	Thinking      *thinking       `json:"thinking,omitempty"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	OutputConfig  *outputConfig   `json:"output_config,omitempty"`
}

// outputConfig asks for a JSON answer natively (structured outputs).
type outputConfig struct {
	Format outputFormat `json:"format"`
}

type outputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

// jsonTool is the tool a JSON response_format is forced through: Anthropic
// answers by calling it, and its input is the client's JSON content.
const jsonTool = "json_response"

// buildOptions are what the target allows the request: native, a JSON
// schema asked for with output_config (structured outputs) rather than
// through a forced tool; webSearch, Anthropic's web search for
// web_search_options.
type buildOptions struct{ native, webSearch, autoCache bool }

// buildRequest maps the OpenAI request onto the Messages API.
func buildRequest(model string, req *api.ChatRequest, opts buildOptions) (*request, error) {
	var in api.ChatParams
	if err := req.Decode(&in); err != nil {
		return nil, err
	}
	if in.N != nil && *in.N > 1 {
		return nil, api.Invalid("n", "Anthropic models return one choice; 'n' must be 1.")
	}
	if opts.autoCache {
		in.PlaceCacheMarkers()
	}
	out := &request{Model: model, Stream: req.Stream, Temperature: in.Temperature, TopP: in.TopP,
		MaxTokens: sentMaxTokens(firstSet(in.MaxCompletionTokens, in.MaxTokens), in.ReasoningEffort)}
	var err error
	if out.StopSequences, err = api.StopSequences(in.Stop); err != nil {
		return nil, err
	}
	if in.User != "" {
		out.Metadata = &metadata{UserID: in.User}
	}
	if err := out.setMessages(in.Messages); err != nil {
		return nil, err
	}
	if err := out.setTools(in); err != nil {
		return nil, err
	}
	if ws := in.WebSearchOptions; ws != nil && opts.webSearch {
		search := tool{Type: webSearchTool, Name: "web_search"}
		if ws.UserLocation != nil && ws.UserLocation.Approximate != (api.Location{}) {
			search.UserLocation = &userLocation{Type: "approximate", Location: ws.UserLocation.Approximate}
		}
		out.Tools = append(out.Tools, search)
	}
	if err := out.setThinking(in.ReasoningEffort); err != nil {
		return nil, err
	}
	out.keepThinking()
	if rf := in.ResponseFormat; opts.native && rf != nil && rf.Type == "json_schema" && len(rf.JSONSchema.Schema) > 0 {
		out.OutputConfig = &outputConfig{Format: outputFormat{Type: "json_schema", Schema: StrictSchema(rf.JSONSchema.Schema)}}
		return out, nil
	}
	return out, out.setResponseFormat(in)
}

// setResponseFormat forces a JSON answer through a tool whose input schema
// is the requested one: for a model without structured outputs, and for
// json_object, which has no schema to give them. With the client's
// tools it is one tool more, the one the model answers with: the model
// must call a tool (tool_choice any), the client's while it works and
// this one for its answer; a client's named tool choice stands, and
// "none" leaves only this one. Extended thinking refuses a forced tool
// choice, so reasoning_effort and a JSON answer do not go together.
func (r *request) setResponseFormat(in api.ChatParams) error {
	rf := in.ResponseFormat
	if rf == nil || rf.Type == "" || rf.Type == "text" {
		return nil
	}
	if r.Thinking != nil {
		return api.Invalid("response_format", "Anthropic models take a JSON response_format only without reasoning_effort.")
	}
	schema := json.RawMessage(`{"type":"object"}`)
	switch rf.Type {
	case "json_schema":
		if len(rf.JSONSchema.Schema) > 0 {
			schema = rf.JSONSchema.Schema
		}
	case "json_object":
	default:
		return api.Invalid("response_format.type", "Invalid 'response_format.type': '%s'.", rf.Type)
	}
	answer := tool{Name: jsonTool, Description: "Respond with the answer as JSON matching this schema.", InputSchema: schema}
	forced := json.RawMessage(`{"type":"tool","name":"` + jsonTool + `"}`)
	if len(r.Tools) == 0 {
		r.Tools, r.ToolChoice = []tool{answer}, forced
		return nil
	}
	answer.Description = "Respond with the final answer as JSON matching this schema, once the other tools gave you what you need."
	r.Tools = append(r.Tools, answer)
	var choice map[string]any
	json.Unmarshal(r.ToolChoice, &choice) //nolint:errcheck // toolChoice wrote it; none is auto
	switch choice["type"] {
	case "none":
		r.ToolChoice = forced
	case "tool":
	default:
		if choice == nil {
			choice = map[string]any{}
		}
		choice["type"] = "any"
		r.ToolChoice, _ = json.Marshal(choice)
	}
	return nil
}

func firstSet(vs ...*int64) *int64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// setMessages moves system and developer messages to the system prompt,
// turns tool results into user tool_result blocks and merges consecutive
// messages of one role, as the Messages API wants alternating turns.
// Cache markers (cache_control) go with the block they mark, as sent: on
// a part, its block; on a message, its last block; on a tool, the tool.
func (r *request) setMessages(msgs []api.ChatMessage) error {
	var system []block
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			text, marker, err := m.TextAndMarker(param)
			if err != nil {
				return err
			}
			system = append(system, block{Type: "text", Text: text, CacheControl: marker})
		case "user":
			blocks, err := userBlocks(param, m.Content)
			if err != nil {
				return err
			}
			markLast(blocks, m.CacheControl)
			r.add("user", blocks)
		case "assistant":
			blocks, err := assistantBlocks(param, m)
			if err != nil {
				return err
			}
			r.add("assistant", blocks)
		case "tool":
			text, marker, err := m.TextAndMarker(param)
			if err != nil {
				return err
			}
			r.add("user", []block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: []block{{Type: "text", Text: text}}, CacheControl: marker}})
		default:
			return api.Invalid(param+".role", "Anthropic models do not take '%s' messages.", m.Role)
		}
	}
	r.System = systemPrompt(system)
	if len(r.Messages) == 0 {
		return api.Invalid("messages", "Anthropic models need at least one user or assistant message.")
	}
	return nil
}

// systemPrompt is the system messages' text joined, or their blocks when
// one carries a cache marker; nil for none.
func systemPrompt(blocks []block) json.RawMessage {
	texts := make([]string, 0, len(blocks))
	marked := false
	for _, b := range blocks {
		texts = append(texts, b.Text)
		marked = marked || b.CacheControl != nil
	}
	var v any = strings.Join(texts, "\n\n")
	switch {
	case marked:
		v = blocks
	case len(blocks) == 0 || v == "":
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// markLast puts a message's cache marker on its last block, unless that
// block carries one of its own.
func markLast(blocks []block, marker json.RawMessage) {
	if n := len(blocks); n > 0 && api.IsMarker(marker) && blocks[n-1].CacheControl == nil {
		blocks[n-1].CacheControl = marker
	}
}

func (r *request) add(role string, blocks []block) {
	if len(blocks) == 0 {
		return
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
		r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
		return
	}
	r.Messages = append(r.Messages, message{Role: role, Content: blocks})
}

func userBlocks(param string, raw json.RawMessage) ([]block, error) {
	parts, err := api.Parts(param, raw)
	if err != nil {
		return nil, err
	}
	var out []block
	for j, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, block{Type: "text", Text: p.Text})
		case "image_url":
			src, err := image(fmt.Sprintf("%s.content[%d].image_url.url", param, j), p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			out = append(out, block{Type: "image", Source: src})
		case "file":
			doc, err := document(fmt.Sprintf("%s.content[%d]", param, j), p)
			if err != nil {
				return nil, err
			}
			out = append(out, doc)
		default:
			return nil, api.Invalid(fmt.Sprintf("%s.content[%d].type", param, j), "Anthropic models do not take '%s' parts.", p.Type)
		}
		if api.IsMarker(p.CacheControl) {
			out[len(out)-1].CacheControl = p.CacheControl
		}
	}
	return out, nil
}

// document maps a file part to a document block: a PDF as base64, plain
// text as text, titled with the file's name; Anthropic takes no other
// document type.
func document(param string, p api.ContentPart) (block, error) {
	mediaType, data, err := p.FileData(param)
	if err != nil {
		return block{}, err
	}
	doc := block{Type: "document", Title: p.File.Filename}
	switch mediaType {
	case "application/pdf":
		doc.Source = &imageSource{Type: "base64", MediaType: mediaType, Data: data}
	case "text/plain":
		text, err := base64.StdEncoding.DecodeString(data)
		if err != nil || !utf8.Valid(text) {
			return block{}, api.Invalid(param+".file.file_data", "A text/plain file must be UTF-8 text in base64.")
		}
		doc.Source = &imageSource{Type: "text", MediaType: mediaType, Data: string(text)}
	default:
		return block{}, api.Invalid(param+".file.file_data", "Anthropic models take PDF (application/pdf) and plain text (text/plain) files, not %s.", mediaType)
	}
	return doc, nil
}

// image maps a data URI to a base64 source and an https URL to a url
// source; the gateway itself never fetches URLs.
func image(param, url string) (*imageSource, error) {
	if strings.HasPrefix(url, "data:") {
		mediaType, data, ok := api.DataURI(url)
		if !ok {
			return nil, api.Invalid(param, "Image data URIs must be base64: data:<media type>;base64,<data>.")
		}
		return &imageSource{Type: "base64", MediaType: mediaType, Data: data}, nil
	}
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		return &imageSource{Type: "url", URL: url}, nil
	}
	return nil, api.Invalid(param, "Unsupported image URL; use an https URL or a base64 data URI.")
}

func assistantBlocks(param string, m api.ChatMessage) ([]block, error) {
	var out []block
	// The thinking comes first, as the model wrote it. A block without
	// what Anthropic checks it by (its signature, a redacted block's
	// data) cannot be sent back.
	for _, t := range m.ThinkingBlocks {
		switch {
		case t.Type == "thinking" && t.Signature != "":
			out = append(out, block{Type: "thinking", Thinking: t.Thinking, Signature: t.Signature})
		case t.Type == "redacted_thinking" && t.Data != "":
			out = append(out, block{Type: "redacted_thinking", Data: t.Data})
		}
	}
	if len(m.Content) > 0 && string(m.Content) != "null" {
		// A marked part marks the one text block; a marker on the message
		// goes on its last block (markLast).
		text, marker, err := api.ChatMessage{Content: m.Content}.TextAndMarker(param)
		if err != nil {
			return nil, err
		}
		if text != "" {
			out = append(out, block{Type: "text", Text: text, CacheControl: marker})
		}
	}
	for j, tc := range m.ToolCalls {
		input, err := api.ToolArguments(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, j), tc.Function.Arguments)
		if err != nil {
			return nil, err
		}
		out = append(out, block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	markLast(out, m.CacheControl)
	return out, nil
}

func (r *request) setTools(in api.ChatParams) error {
	for i, t := range in.Tools {
		if t.Type != "function" {
			return api.Invalid(fmt.Sprintf("tools[%d].type", i), "Only function tools are supported, got '%s'.", t.Type)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		var marker json.RawMessage
		if api.IsMarker(t.CacheControl) {
			marker = t.CacheControl
		}
		r.Tools = append(r.Tools, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema, CacheControl: marker})
	}
	choice, err := toolChoice(in.ToolChoice, in.ParallelToolCalls)
	r.ToolChoice = choice
	return err
}

func toolChoice(raw json.RawMessage, parallel *bool) (json.RawMessage, error) {
	tc := map[string]any{}
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		if parallel == nil {
			return nil, nil
		}
		tc["type"] = "auto"
	case json.Unmarshal(raw, &s) == nil:
		kind := map[string]string{"auto": "auto", "none": "none", "required": "any"}[s]
		if kind == "" {
			return nil, api.Invalid("tool_choice", "Invalid 'tool_choice': '%s'.", s)
		}
		tc["type"] = kind
	default:
		var named struct {
			Function struct{ Name string } `json:"function"`
		}
		if json.Unmarshal(raw, &named) != nil || named.Function.Name == "" {
			return nil, api.Invalid("tool_choice", "Invalid 'tool_choice'.")
		}
		tc["type"], tc["name"] = "tool", named.Function.Name
	}
	if parallel != nil && !*parallel && tc["type"] != "none" {
		tc["disable_parallel_tool_use"] = true
	}
	return json.Marshal(tc)
}

// keepThinking sends the thinking of earlier turns back only with
// thinking on, and turns thinking off rather than send a turn Anthropic
// refuses: with thinking on, the assistant turn a tool loop continues
// must begin with its thinking, which the gateway never makes up.
func (r *request) keepThinking() {
	if r.Thinking != nil {
		for i := len(r.Messages) - 1; i >= 0; i-- {
			m := r.Messages[i]
			if m.Role != "assistant" {
				continue
			}
			if slices.ContainsFunc(m.Content, func(b block) bool { return b.Type == "tool_use" }) && !isThinking(m.Content[0]) {
				r.Thinking = nil
			}
			break
		}
	}
	if r.Thinking != nil {
		return
	}
	for i := range r.Messages {
		r.Messages[i].Content = slices.DeleteFunc(r.Messages[i].Content, isThinking)
	}
}

func isThinking(b block) bool { return b.Type == "thinking" || b.Type == "redacted_thinking" }

// thinkingBudget maps reasoning_effort to Anthropic's thinking budget.
func thinkingBudget(effort string) (int64, bool) {
	switch effort {
	case "minimal":
		return 1024, true
	case "low":
		return 2048, true
	case "medium":
		return 8192, true
	case "high":
		return 24576, true
	}
	return 0, false
}

// sentMaxTokens is the max_tokens a request is sent: the client's bound,
// else DefaultMaxTokens, raised above the thinking budget of its
// reasoning effort (Anthropic requires max_tokens above the budget).
func sentMaxTokens(client *int64, effort string) int64 {
	n := int64(DefaultMaxTokens)
	if client != nil {
		n = *client
	}
	if budget, ok := thinkingBudget(effort); ok && n <= budget {
		n = budget + DefaultMaxTokens
	}
	return n
}

func (r *request) setThinking(effort string) error {
	if effort == "" || effort == "none" {
		return nil
	}
	budget, ok := thinkingBudget(effort)
	if !ok {
		return api.Invalid("reasoning_effort", "Invalid 'reasoning_effort': '%s'.", effort)
	}
	r.Thinking = &thinking{Type: "enabled", BudgetTokens: budget}
	r.Temperature, r.TopP = nil, nil // not allowed with thinking
	return nil
}
