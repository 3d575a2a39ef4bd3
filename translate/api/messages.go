package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"modelgate/translate/jsonscan"
)

// MessagesRequest is a request to Anthropic's Messages API (POST
// /v1/messages), the gateway's second front door, or to its count_tokens:
// what the gateway reads of it, and the body as sent, which a provider of
// the Messages API gets byte for byte but for the model.
type MessagesRequest struct {
	Model  string
	Stream bool
	// MaxTokens is the bound on the answer; zero for count_tokens, which
	// has none.
	MaxTokens int64
	// Members are the request's top-level members as sent.
	Members map[string]json.RawMessage
	// Body is the request as sent; ModelAt is its model member, where a
	// translator puts the upstream model without walking Body again (its
	// End is zero when a repeated key makes Members differ from Body).
	Body    []byte
	ModelAt jsonscan.Member
	// Version and Beta are the client's anthropic-version and
	// anthropic-beta headers, which a provider of the Messages API gets
	// as sent.
	Version, Beta string
}

// ParseMessagesRequest validates what the gateway reads of a Messages API
// request as Anthropic does: a model, messages, and (but for
// count_tokens) max_tokens. The rest is the provider's to check.
func ParseMessagesRequest(body []byte, countTokens bool) (*MessagesRequest, error) {
	var scratch [16]jsonscan.Member
	members, err := objectMembers(body, scratch[:0])
	if err != nil {
		return nil, err
	}
	m := memberMap(members)
	r := &MessagesRequest{Members: m, Body: body}
	if len(members) == len(m) {
		for _, mb := range members {
			if keyIs(mb, "model") {
				r.ModelAt = mb
			}
		}
	}
	if r.Model, err = requiredString(m, "model"); err != nil {
		return nil, err
	}
	if err := checkTurns(m["messages"]); err != nil {
		return nil, err
	}
	if r.Stream, err = optionalBool(m, "stream"); err != nil {
		return nil, err
	}
	if countTokens {
		return r, nil
	}
	if jsonscan.IsNull(m["max_tokens"]) {
		return nil, missing("max_tokens")
	}
	if err := integerIn(m, "max_tokens", 1, 1<<31); err != nil {
		return nil, err
	}
	r.MaxTokens = PositiveInteger(m, "max_tokens")
	return r, nil
}

// WebSearchMaxUses is the most web searches the request's web search
// tools (Anthropic's web_search_20250305 and its later versions) allow:
// the sum of their max_uses, at most math.MaxInt64. A web search tool
// without max_uses allows any number, which adds nothing: its bound is
// unknown.
func (r *MessagesRequest) WebSearchMaxUses() int64 {
	var tools []json.RawMessage
	if json.Unmarshal(r.Members["tools"], &tools) != nil {
		return 0
	}
	var n int64
	for _, raw := range tools {
		var t struct {
			Type    string `json:"type"`
			MaxUses int64  `json:"max_uses"`
		}
		if json.Unmarshal(raw, &t) != nil || !strings.HasPrefix(t.Type, "web_search_") || t.MaxUses <= 0 {
			continue
		}
		n = min(n, math.MaxInt64-t.MaxUses) + t.MaxUses
	}
	return n
}

// checkTurns requires a Messages API conversation: a non-empty array of
// objects with a role and content. Roles are the provider's to check:
// Claude Code sends system turns among the messages.
func checkTurns(raw json.RawMessage) error {
	if jsonscan.IsNull(raw) {
		return missing("messages")
	}
	var turns []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &turns) != nil {
		return wrongType("messages", "an array of objects", raw)
	}
	if len(turns) == 0 {
		return invalidValue("messages", "empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	for i, t := range turns {
		param := "messages[" + strconv.Itoa(i) + "]"
		if t.Role == "" {
			return missing(param + ".role")
		}
		if jsonscan.IsNull(t.Content) {
			return missing(param + ".content")
		}
	}
	return nil
}

// MessagesErrorType is the Messages API's error type of an HTTP status.
func MessagesErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// MessagesError is the Messages API's error body:
// {"type":"error","error":{"type","message"}}.
func MessagesError(typ, message string) []byte {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e.Type, e.Error.Type, e.Error.Message = "error", typ, message
	b, _ := json.Marshal(e) // plain strings
	return b
}

// MessagesErrorEvent is the Messages API's stream error event, appended
// to out.
func MessagesErrorEvent(out []byte, typ, message string) []byte {
	out = append(out, "event: error\ndata: "...)
	out = append(out, MessagesError(typ, message)...)
	return append(out, "\n\n"...)
}
