package bedrock

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"modelgate/translate/anthropic"
	"modelgate/translate/api"
)

// Converse request shapes; only the members of each block type are set.
type cblock struct {
	Text             string            `json:"text,omitempty"`
	Image            *imageBlock       `json:"image,omitempty"`
	Document         *documentBlock    `json:"document,omitempty"`
	CachePoint       *cachePoint       `json:"cachePoint,omitempty"`
	ToolUse          *toolUse          `json:"toolUse,omitempty"`
	ToolResult       *toolResult       `json:"toolResult,omitempty"`
	ReasoningContent *reasoningContent `json:"reasoningContent,omitempty"`
}

// reasoningContent is Claude's reasoning on Bedrock: its text with the
// signature it is checked by, or redacted (base64) content.
type reasoningContent struct {
	ReasoningText *struct {
		Text      string `json:"text"`
		Signature string `json:"signature,omitempty"`
	} `json:"reasoningText,omitempty"`
	RedactedContent string `json:"redactedContent,omitempty"`
}

type imageBlock struct {
	Format string `json:"format"`
	Source struct {
		Bytes string `json:"bytes"`
	} `json:"source"`
}

// documentBlock is a file: its format, a name the model may see, and its
// bytes in base64.
type documentBlock struct {
	Format string `json:"format"`
	Name   string `json:"name"`
	Source struct {
		Bytes string `json:"bytes"`
	} `json:"source"`
}

// documentFormats are Converse's document formats by media type.
var documentFormats = map[string]string{
	"application/pdf": "pdf", "text/csv": "csv", "text/html": "html", "text/plain": "txt", "text/markdown": "md",
	"application/msword": "doc", "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
	"application/vnd.ms-excel": "xls", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}

// document maps a file part to a document block, named after its file
// (Converse allows letters, digits, single spaces, hyphens, parentheses
// and square brackets; the extension goes) or "document-<n>", n its
// part's index: names must differ within a request.
func document(param string, n int, p api.ContentPart) (*documentBlock, error) {
	mediaType, data, err := p.FileData(param)
	if err != nil {
		return nil, err
	}
	format, ok := documentFormats[mediaType]
	if !ok {
		return nil, api.Invalid(param+".file.file_data", "Bedrock Converse takes pdf, csv, doc, docx, xls, xlsx, html, txt and md documents, not %s.", mediaType)
	}
	name := strings.TrimSuffix(p.File.Filename, path.Ext(p.File.Filename))
	name = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(" -()[]", r)) {
			return r
		}
		return ' '
	}, name)), " ")
	if name == "" {
		name = "document-" + strconv.Itoa(n)
	}
	doc := &documentBlock{Format: format, Name: name}
	doc.Source.Bytes = data
	return doc, nil
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	// Type is "server_tool_use" in an answer for a tool Bedrock ran itself
	// (Nova's system tools: nova_code_interpreter, nova_grounding); never
	// sent.
	Type string `json:"type,omitempty"`
}

// serverToolUse is the type of a tool use Bedrock ran itself: the client
// must not run it, so it is no tool call.
const serverToolUse = "server_tool_use"

type toolResult struct {
	ToolUseID string   `json:"toolUseId"`
	Content   []cblock `json:"content"`
}

type cmessage struct {
	Role    string   `json:"role"`
	Content []cblock `json:"content"`
}

type inferenceConfig struct {
	MaxTokens     *int64   `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

// toolSpec is a tool, or a cache point after the tools before it.
type toolSpec struct {
	ToolSpec *struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		InputSchema struct {
			JSON json.RawMessage `json:"json"`
		} `json:"inputSchema"`
	} `json:"toolSpec,omitempty"`
	CachePoint *cachePoint `json:"cachePoint,omitempty"`
}

// newToolSpec is the tool name, described, taking input of schema.
func newToolSpec(name, description string, schema json.RawMessage) toolSpec {
	var s toolSpec
	s.ToolSpec = &struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		InputSchema struct {
			JSON json.RawMessage `json:"json"`
		} `json:"inputSchema"`
	}{Name: name, Description: description}
	s.ToolSpec.InputSchema.JSON = schema
	return s
}

// cachePoint marks the end of a prompt prefix Bedrock caches: a client's
// cache_control marker, its ttl kept when Converse takes it (5m or 1h).
// Bedrock caches for Claude and Nova models; other models get no cache
// points.
type cachePoint struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// cachePointBlock is the block of the cache point for marker.
func cachePointBlock(marker json.RawMessage) cblock {
	var m struct {
		TTL string `json:"ttl"`
	}
	json.Unmarshal(marker, &m) //nolint:errcheck // a marker without a readable ttl has the default lifetime
	p := &cachePoint{Type: "default"}
	if m.TTL == "5m" || m.TTL == "1h" {
		p.TTL = m.TTL
	}
	return cblock{CachePoint: p}
}

// caches reports whether model takes cache points.
func caches(model string) bool {
	return strings.Contains(model, "anthropic.claude") || strings.Contains(model, "amazon.nova")
}

type toolConfig struct {
	Tools      []toolSpec     `json:"tools"`
	ToolChoice map[string]any `json:"toolChoice,omitempty"`
}

type converseRequest struct {
	Messages                     []cmessage      `json:"messages"`
	System                       []cblock        `json:"system,omitempty"`
	InferenceConfig              inferenceConfig `json:"inferenceConfig"`
	ToolConfig                   *toolConfig     `json:"toolConfig,omitempty"`
	AdditionalModelRequestFields map[string]any  `json:"additionalModelRequestFields,omitempty"`
	OutputConfig                 *outputConfig   `json:"outputConfig,omitempty"`
	// caching: the model takes cache points (caches), where the client's
	// cache_control markers become them.
	caching bool
}

// outputConfig asks for a JSON answer natively (structured outputs): the
// schema goes as a JSON string.
type outputConfig struct {
	TextFormat struct {
		Type      string `json:"type"`
		Structure struct {
			JSONSchema struct {
				Schema string `json:"schema"`
				Name   string `json:"name,omitempty"`
			} `json:"jsonSchema"`
		} `json:"structure"`
	} `json:"textFormat"`
}

// jsonTool is the tool a JSON response_format is forced through.
const jsonTool = "json_response"

func buildRequest(model string, req *api.ChatRequest, autoCache bool) (*converseRequest, error) {
	var in api.ChatParams
	if err := req.Decode(&in); err != nil {
		return nil, err
	}
	if autoCache {
		in.PlaceCacheMarkers()
	}
	if in.N != nil && *in.N > 1 {
		return nil, api.Invalid("n", "Bedrock Converse returns one choice; 'n' must be 1.")
	}
	client := in.MaxCompletionTokens
	if client == nil {
		client = in.MaxTokens
	}
	r := &converseRequest{InferenceConfig: inferenceConfig{MaxTokens: sentMaxTokens(model, client, in.ReasoningEffort),
		Temperature: in.Temperature, TopP: in.TopP}, caching: caches(model)}
	var err error
	if r.InferenceConfig.StopSequences, err = api.StopSequences(in.Stop); err != nil {
		return nil, err
	}
	if err := r.setMessages(in); err != nil {
		return nil, err
	}
	if err := r.setTools(in); err != nil {
		return nil, err
	}
	if err := r.setReasoning(model, in.ReasoningEffort); err != nil {
		return nil, err
	}
	r.keepReasoning()
	if rf := in.ResponseFormat; nativeJSON(model) && rf != nil && rf.Type == "json_schema" && len(rf.JSONSchema.Schema) > 0 {
		r.OutputConfig = &outputConfig{}
		f := &r.OutputConfig.TextFormat
		f.Type, f.Structure.JSONSchema.Name = "json_schema", rf.JSONSchema.Name
		f.Structure.JSONSchema.Schema = string(anthropic.StrictSchema(rf.JSONSchema.Schema))
		return r, nil
	}
	return r, r.setResponseFormat(in)
}

// nativeJSON reports whether model answers a JSON schema natively through
// Converse (outputConfig.textFormat): the Claude models with structured
// outputs. Others get the schema as a forced tool.
func nativeJSON(model string) bool {
	return strings.Contains(model, "anthropic.claude") && anthropic.StructuredOutputs(model)
}

// setReasoning maps reasoning_effort to Claude's thinking budget, passed
// through additionalModelRequestFields; other Bedrock models take no
// common reasoning control, so it is refused rather than dropped.
// thinkingBudgets are Claude's thinking budgets by reasoning_effort.
var thinkingBudgets = map[string]int64{"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}

// sentMaxTokens is the maxTokens a request is sent: the client's bound,
// raised above the thinking budget of its reasoning effort on a Claude
// model (which requires maxTokens above the budget); nil for none.
func sentMaxTokens(model string, client *int64, effort string) *int64 {
	budget := thinkingBudgets[effort]
	if budget == 0 || !strings.Contains(model, "anthropic.claude") || (client != nil && *client > budget) {
		return client
	}
	v := budget + 4096
	return &v
}

func (r *converseRequest) setReasoning(model, effort string) error {
	if effort == "" || effort == "none" {
		return nil
	}
	budget := thinkingBudgets[effort]
	if budget == 0 {
		return api.Invalid("reasoning_effort", "Invalid 'reasoning_effort': '%s'.", effort)
	}
	if !Reasons(model) {
		return api.Invalid("reasoning_effort", "reasoning_effort is supported on Bedrock for Anthropic Claude models only.")
	}
	r.AdditionalModelRequestFields = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": budget}}
	r.InferenceConfig.Temperature, r.InferenceConfig.TopP = nil, nil
	return nil
}

// setResponseFormat forces a JSON answer through a tool whose input schema
// is the requested one, where the model does not answer it natively. With the client's tools it is one tool more, the
// one the model answers with: the model must call a tool (toolChoice
// any), the client's while it works and this one for its answer; a
// client's named tool choice stands. Extended thinking refuses a forced
// tool choice, so reasoning_effort and a JSON answer do not go together.
func (r *converseRequest) setResponseFormat(in api.ChatParams) error {
	rf := in.ResponseFormat
	if rf == nil || rf.Type == "" || rf.Type == "text" {
		return nil
	}
	if r.AdditionalModelRequestFields != nil {
		return api.Invalid("response_format", "Bedrock takes a JSON response_format only without reasoning_effort.")
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if rf.Type == "json_schema" && len(rf.JSONSchema.Schema) > 0 {
		schema = rf.JSONSchema.Schema
	} else if rf.Type != "json_object" && rf.Type != "json_schema" {
		return api.Invalid("response_format.type", "Invalid 'response_format.type': '%s'.", rf.Type)
	}
	spec := newToolSpec(jsonTool, "Respond with the answer as JSON matching this schema.", schema)
	if r.ToolConfig == nil || len(r.ToolConfig.Tools) == 0 {
		r.ToolConfig = &toolConfig{Tools: []toolSpec{spec}, ToolChoice: map[string]any{"tool": map[string]any{"name": jsonTool}}}
		return nil
	}
	spec.ToolSpec.Description = "Respond with the final answer as JSON matching this schema, once the other tools gave you what you need."
	r.ToolConfig.Tools = append(r.ToolConfig.Tools, spec)
	if _, named := r.ToolConfig.ToolChoice["tool"]; !named {
		r.ToolConfig.ToolChoice = map[string]any{"any": map[string]any{}}
	}
	return nil
}

func (r *converseRequest) setMessages(in api.ChatParams) error {
	for i, m := range in.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		var blocks []cblock
		var err error
		role := m.Role
		switch m.Role {
		case "system", "developer":
			text, marker, err := m.TextAndMarker(param)
			if err != nil {
				return err
			}
			r.System = append(r.System, cblock{Text: text})
			r.System = r.cachePoint(r.System, marker)
			continue
		case "user":
			blocks, err = userBlocks(param, m.Content, r.caching)
		case "assistant":
			blocks = reasoningBlocks(m.ThinkingBlocks)
			var text []cblock
			text, err = assistantBlocks(param, m.Content, r.caching)
			blocks = append(blocks, text...)
			for j, tc := range m.ToolCalls {
				input, err := api.ToolArguments(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, j), tc.Function.Arguments)
				if err != nil {
					return err
				}
				blocks = append(blocks, cblock{ToolUse: &toolUse{ToolUseID: tc.ID, Name: tc.Function.Name, Input: input}})
			}
		case "tool":
			var text string
			var marker json.RawMessage
			text, marker, err = m.TextAndMarker(param)
			role, blocks = "user", r.cachePoint([]cblock{{ToolResult: &toolResult{ToolUseID: m.ToolCallID, Content: []cblock{{Text: text}}}}}, marker)
		default:
			return api.Invalid(param+".role", "Bedrock Converse does not take '%s' messages.", m.Role)
		}
		if err != nil {
			return err
		}
		r.add(role, r.cachePoint(blocks, m.CacheControl))
	}
	if len(r.Messages) == 0 {
		return api.Invalid("messages", "Bedrock Converse needs at least one user or assistant message.")
	}
	return nil
}

// cachePoint follows blocks with a cache point for a client's marker, on a
// model that takes them, unless they end in one.
func (r *converseRequest) cachePoint(blocks []cblock, marker json.RawMessage) []cblock {
	if n := len(blocks); !r.caching || !api.IsMarker(marker) || n == 0 || blocks[n-1].CachePoint != nil {
		return blocks
	}
	return append(blocks, cachePointBlock(marker))
}

func (r *converseRequest) add(role string, blocks []cblock) {
	if len(blocks) == 0 {
		return
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
		r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
		return
	}
	r.Messages = append(r.Messages, cmessage{Role: role, Content: blocks})
}

// reasoningBlocks are the reasoning blocks of an assistant turn, as the
// gateway gave them to the client (api.ThinkingBlock): a block without
// what Bedrock checks it by (a signature, redacted content) is not sent.
func reasoningBlocks(thinking []api.ThinkingBlock) []cblock {
	var out []cblock
	for _, t := range thinking {
		rc := &reasoningContent{}
		switch {
		case t.Type == "thinking" && t.Signature != "":
			rc.ReasoningText = &struct {
				Text      string `json:"text"`
				Signature string `json:"signature,omitempty"`
			}{t.Thinking, t.Signature}
		case t.Type == "redacted_thinking" && t.Data != "":
			rc.RedactedContent = t.Data
		default:
			continue
		}
		out = append(out, cblock{ReasoningContent: rc})
	}
	return out
}

// keepReasoning sends the reasoning of earlier turns back only with
// thinking on, and turns thinking off rather than send a turn Claude
// refuses: with thinking on, the assistant turn a tool loop continues
// must begin with its reasoning, which the gateway never makes up.
func (r *converseRequest) keepReasoning() {
	reasoning := func(b cblock) bool { return b.ReasoningContent != nil }
	if r.AdditionalModelRequestFields != nil {
		for i := len(r.Messages) - 1; i >= 0; i-- {
			m := r.Messages[i]
			if m.Role != "assistant" {
				continue
			}
			if slices.ContainsFunc(m.Content, func(b cblock) bool { return b.ToolUse != nil }) && !reasoning(m.Content[0]) {
				r.AdditionalModelRequestFields = nil
			}
			break
		}
	}
	if r.AdditionalModelRequestFields != nil {
		return
	}
	for i := range r.Messages {
		r.Messages[i].Content = slices.DeleteFunc(r.Messages[i].Content, reasoning)
	}
}

// assistantBlocks is an assistant message's text as one block, followed
// by a cache point when caching and one of its parts is marked (a marker
// on the message goes after its last block: setMessages).
func assistantBlocks(param string, raw json.RawMessage, caching bool) ([]cblock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	text, marker, err := api.ChatMessage{Content: raw}.TextAndMarker(param)
	if err != nil || text == "" {
		return nil, err
	}
	out := []cblock{{Text: text}}
	if caching && api.IsMarker(marker) {
		out = append(out, cachePointBlock(marker))
	}
	return out, nil
}

// userBlocks maps a user message's parts; caching: a marked part is
// followed by a cache point.
func userBlocks(param string, raw json.RawMessage, caching bool) ([]cblock, error) {
	parts, err := api.Parts(param, raw)
	if err != nil {
		return nil, err
	}
	var out []cblock
	for j, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, cblock{Text: p.Text})
		case "image_url":
			img, err := image(fmt.Sprintf("%s.content[%d].image_url.url", param, j), p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			out = append(out, cblock{Image: img})
		case "file":
			doc, err := document(fmt.Sprintf("%s.content[%d]", param, j), j, p)
			if err != nil {
				return nil, err
			}
			out = append(out, cblock{Document: doc})
		default:
			return nil, api.Invalid(fmt.Sprintf("%s.content[%d].type", param, j), "Bedrock Converse does not take '%s' parts.", p.Type)
		}
		if caching && api.IsMarker(p.CacheControl) {
			out = append(out, cachePointBlock(p.CacheControl))
		}
	}
	return out, nil
}

// image takes base64 data URIs of the formats Converse accepts; Converse
// takes no URLs and the gateway does not fetch them.
func image(param, url string) (*imageBlock, error) {
	mediaType, data, ok := api.DataURI(url)
	format, isImage := strings.CutPrefix(mediaType, "image/")
	if format == "jpg" {
		format = "jpeg"
	}
	if !ok || !isImage || !slices.Contains([]string{"png", "jpeg", "gif", "webp"}, format) {
		return nil, api.Invalid(param, "Bedrock takes images as base64 data URIs of png, jpeg, gif or webp, not URLs.")
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return nil, api.Invalid(param, "The image data is not valid base64.")
	}
	img := &imageBlock{Format: format}
	img.Source.Bytes = data
	return img, nil
}

func (r *converseRequest) setTools(in api.ChatParams) error {
	if len(in.Tools) == 0 {
		return nil
	}
	tc := &toolConfig{}
	for i, t := range in.Tools {
		if t.Type != "function" {
			return api.Invalid(fmt.Sprintf("tools[%d].type", i), "Only function tools are supported, got '%s'.", t.Type)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tc.Tools = append(tc.Tools, newToolSpec(t.Function.Name, t.Function.Description, schema))
		if r.caching && api.IsMarker(t.CacheControl) {
			tc.Tools = append(tc.Tools, toolSpec{CachePoint: cachePointBlock(t.CacheControl).CachePoint})
		}
	}
	choice, err := toolChoice(in.ToolChoice)
	tc.ToolChoice = choice
	r.ToolConfig = tc
	return err
}

func toolChoice(raw json.RawMessage) (map[string]any, error) {
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case json.Unmarshal(raw, &s) == nil:
		switch s {
		case "auto":
			return map[string]any{"auto": map[string]any{}}, nil
		case "required":
			return map[string]any{"any": map[string]any{}}, nil
		}
		return nil, api.Invalid("tool_choice", "Bedrock Converse supports tool_choice auto, required or a named function, not '%s'.", s)
	}
	var named struct {
		Function struct{ Name string } `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Function.Name == "" {
		return nil, api.Invalid("tool_choice", "Invalid 'tool_choice'.")
	}
	return map[string]any{"tool": map[string]any{"name": named.Function.Name}}, nil
}
