package scripted

import (
	"encoding/json"
	"net/http"
)

// geminiRequest is the part of a generateContent request the model reads.
type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig *struct {
			Mode string `json:"mode"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ThinkingConfig     *struct {
			ThinkingBudget  *int   `json:"thinkingBudget"`
			ThinkingLevel   string `json:"thinkingLevel"`
			IncludeThoughts bool   `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

type geminiPart struct {
	Text             string `json:"text,omitempty"`
	Thought          bool   `json:"thought,omitempty"`
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
	FunctionCall     *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse,omitempty"`
}

// callSignature is the thought signature the model puts on its call of
// name.
func callSignature(name string) string { return Sign("call:" + name) }

// Gemini answers generateContent and streamGenerateContent (as SSE, the
// ?alt=sse form). Like Gemini 3 it signs each function call
// (thoughtSignature) and refuses a function call of the current turn sent
// back without its signature; thoughts are sent (thought: true) when
// includeThoughts asks for them.
func Gemini(w http.ResponseWriter, stream bool, model string, body []byte) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		geminiError(w, refuse("Invalid JSON payload received."))
		return
	}
	c := Conversation{InputChars: len(body)}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			p := f.Parameters
			if p == nil {
				p = f.ParametersJSONSchema
			}
			if p == nil {
				p = json.RawMessage(`{"type":"object"}`)
			}
			c.Tools = append(c.Tools, Tool{Name: f.Name, Parameters: p})
		}
	}
	if tc := req.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil {
		c.MustCall = tc.FunctionCallingConfig.Mode == "ANY"
	}
	includeThoughts := false
	if gc := req.GenerationConfig; gc != nil {
		if gc.ResponseMimeType == "application/json" {
			c.Schema = gc.ResponseJSONSchema
			if c.Schema == nil {
				c.Schema = gc.ResponseSchema
			}
			if c.Schema == nil {
				c.Schema = json.RawMessage(`{}`)
			}
		}
		if tc := gc.ThinkingConfig; tc != nil {
			c.Reasoning = tc.ThinkingLevel != "" || tc.ThinkingBudget == nil || *tc.ThinkingBudget != 0
			includeThoughts = tc.IncludeThoughts
		}
	}
	current := 0 // the first content of the current turn
	for i, content := range req.Contents {
		for _, p := range content.Parts {
			if content.Role == "user" && p.Text != "" {
				current = i
			}
		}
	}
	for i, content := range req.Contents {
		first := true
		for j, p := range content.Parts {
			switch {
			case content.Role == "model" && p.FunctionCall != nil && first:
				first = false
				if i >= current && p.ThoughtSignature != callSignature(p.FunctionCall.Name) {
					geminiError(w, refuse("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", p.FunctionCall.Name, j+1))
					return
				}
			case content.Role == "user" && p.Text != "":
				c.Prompt, c.Results = p.Text, nil
			case p.FunctionResponse != nil:
				c.Results = append(c.Results, functionResult(p.FunctionResponse.Response))
			}
		}
	}
	t := Answer(c)
	var parts []map[string]any
	if t.Thinking != "" && includeThoughts {
		parts = append(parts, map[string]any{"text": t.Thinking, "thought": true})
	}
	if t.Call != nil {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": t.Call.Name, "args": json.RawMessage(t.Call.Arguments)}, "thoughtSignature": callSignature(t.Call.Name)})
	}
	thoughts := 0
	if t.Thinking != "" {
		thoughts = max(1, len(t.Thinking)/4)
	}
	usage := map[string]any{"promptTokenCount": t.InputTokens, "candidatesTokenCount": t.OutputTokens - thoughts, "totalTokenCount": t.InputTokens + t.OutputTokens}
	if thoughts > 0 {
		usage["thoughtsTokenCount"] = thoughts
		usage["candidatesTokenCount"] = max(1, t.OutputTokens-thoughts)
		usage["totalTokenCount"] = t.InputTokens + thoughts + max(1, t.OutputTokens-thoughts)
	}
	id := newID("scripted")
	answer := func(parts []map[string]any, finish bool, usage any) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish {
			cand["finishReason"] = "STOP"
		}
		a := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": id}
		if usage != nil {
			a["usageMetadata"] = usage
		}
		return a
	}
	if !stream {
		if t.Call == nil {
			parts = append(parts, map[string]any{"text": t.Text})
		}
		writeJSON(w, http.StatusOK, answer(parts, true, usage))
		return
	}
	if t.Call == nil {
		for _, p := range pieces(t.Text) {
			parts = append(parts, map[string]any{"text": p})
		}
	}
	s := startSSE(w)
	for i, p := range parts {
		if i < len(parts)-1 {
			s.event("", answer([]map[string]any{p}, false, nil))
		} else {
			s.event("", answer([]map[string]any{p}, true, usage))
		}
	}
}

func geminiError(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": err.Error(), "status": "INVALID_ARGUMENT"}})
}

// functionResult is a function response's text: the value of its one
// "result", "output" or "content" field when that is a string (how
// clients wrap a tool's text), else the response's JSON.
func functionResult(raw json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil && len(fields) == 1 {
		for _, name := range []string{"result", "output", "content"} {
			var s string
			if v, ok := fields[name]; ok && json.Unmarshal(v, &s) == nil {
				return s
			}
		}
	}
	return text(raw)
}
