package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Helpers for translators to other wire formats: they read the validated
// request into their own view of it and share the OpenAI-side rules.

// Decode reads the request's members into v, a translator's view of the
// chat completions request. A member of the wrong shape is a RequestError.
func (r *ChatRequest) Decode(v any) error {
	raw, err := json.Marshal(r.Members)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &RequestError{Code: "invalid_type", Message: "The request does not match the chat completions schema: " + err.Error()}
	}
	return nil
}

// Invalid is a RequestError with code invalid_value.
func Invalid(param, format string, args ...any) error {
	return &RequestError{Param: param, Code: "invalid_value", Message: fmt.Sprintf(format, args...)}
}

// StopSequences reads stop: a string or an array of strings.
func StopSequences(raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return nil, &RequestError{Param: "stop", Code: "invalid_type", Message: "Invalid type for 'stop': expected a string or an array of strings."}
	}
	return many, nil
}

// ContentPart is one part of a message's content array.
type ContentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// TextContent reads content that must be text: a string, or text parts
// joined. param names the message, such as messages[2].
func TextContent(param string, raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []ContentPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", &RequestError{Param: param + ".content", Code: "invalid_type", Message: "Expected a string or an array of text parts."}
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", Invalid(param+".content", "Only text parts are allowed here, got '%s'.", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// Parts reads user content: a string becomes one text part.
func Parts(param string, raw json.RawMessage) ([]ContentPart, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []ContentPart{{Type: "text", Text: s}}, nil
	}
	var parts []ContentPart
	if json.Unmarshal(raw, &parts) != nil {
		return nil, &RequestError{Param: param + ".content", Code: "invalid_type", Message: "Expected a string or an array of content parts."}
	}
	return parts, nil
}

// DataURI splits a base64 data URI into its media type and data.
func DataURI(url string) (mediaType, data string, ok bool) {
	rest, isData := strings.CutPrefix(url, "data:")
	meta, data, found := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	return mediaType, data, isData && found && isBase64 && mediaType != ""
}

// ToolArguments returns a tool call's arguments as JSON: empty means {}.
func ToolArguments(param, args string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(args)) {
		return nil, Invalid(param, "Tool call arguments must be a JSON object.")
	}
	return json.RawMessage(args), nil
}
