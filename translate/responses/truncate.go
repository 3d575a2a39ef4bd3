package responses

import "encoding/json"

// EstimateTokens is a conservative token count for JSON text: about four
// bytes a token, as for English text with the usual tokenizers.
func EstimateTokens(raw []byte) int { return (len(raw) + 3) / 4 }

// Truncate implements truncation "auto": it drops the oldest history items
// until the conversation fits window tokens, keeping reserved tokens for
// everything that is not history (instructions, the new input, the
// output). A function call output never stays without its call.
func Truncate(history []json.RawMessage, reserved, window int) []json.RawMessage {
	total := reserved
	for _, it := range history {
		total += EstimateTokens(it)
	}
	for len(history) > 0 && total > window {
		total -= EstimateTokens(history[0])
		history = history[1:]
		for len(history) > 0 && itemType(history[0]) == "function_call_output" {
			total -= EstimateTokens(history[0])
			history = history[1:]
		}
	}
	return history
}

func itemType(raw json.RawMessage) string {
	var it struct {
		Type string `json:"type"`
	}
	json.Unmarshal(raw, &it) //nolint:errcheck // an item without a type is a message
	return it.Type
}

// Reserved estimates the tokens of what truncation must keep: the
// instructions, the new input and room for max_output_tokens.
func (r *Request) Reserved() int {
	n := EstimateTokens(r.Members["instructions"]) + EstimateTokens(r.Members["input"]) + EstimateTokens(r.Members["tools"])
	var maxOut int
	if json.Unmarshal(r.Members["max_output_tokens"], &maxOut) == nil {
		n += maxOut
	}
	return n
}

// Truncation is the request's truncation mode, "disabled" by default.
func (r *Request) Truncation() string {
	var t string
	if json.Unmarshal(r.Members["truncation"], &t) != nil || t == "" {
		return "disabled"
	}
	return t
}
