package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"modelgate/translate/jsonscan"
	"slices"
	"strconv"
	"unicode/utf8"
)

// ChatRequest is a validated CreateChatCompletionRequest. The members the
// gateway acts on are parsed; every other member is kept raw, so that
// re-encoding for an upstream loses nothing.
type ChatRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	// Members are the request's top-level members as sent.
	Members map[string]json.RawMessage
	// Body is the request as sent, when Members are its members in the
	// order sent (no key repeats): a translator that changes a few
	// members can edit it rather than encode Members anew.
	Body []byte
	// ModelAt and OptionsAt are Body's model and stream_options members
	// (OptionsAt.End is 0 when there is none), where a translator edits
	// Body without walking it again.
	ModelAt, OptionsAt jsonscan.Member
}

var messageRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// ParseChatRequest parses and validates a chat completions request body.
// Errors are *RequestError.
func ParseChatRequest(body []byte) (*ChatRequest, error) {
	var scratch [24]jsonscan.Member
	members, err := objectMembers(body, scratch[:0])
	if err != nil {
		return nil, err
	}
	m := memberMap(members)
	r := &ChatRequest{Members: m}
	if len(members) == len(m) {
		r.Body = body
		for _, mb := range members {
			switch {
			case keyIs(mb, "model"):
				r.ModelAt = mb
			case keyIs(mb, "stream_options"):
				r.OptionsAt = mb
			}
		}
	}
	checks := []func() error{
		func() (err error) { r.Model, err = requiredString(m, "model"); return err },
		func() error { return checkMessages(m) },
		func() error { return numberIn(m, "temperature", 0, 2) },
		func() error { return numberIn(m, "top_p", 0, 1) },
		func() error { return numberIn(m, "frequency_penalty", -2, 2) },
		func() error { return numberIn(m, "presence_penalty", -2, 2) },
		func() error { return integerIn(m, "n", 1, 128) },
		func() error { return integerIn(m, "max_tokens", 1, 1<<31) },
		func() error { return integerIn(m, "max_completion_tokens", 1, 1<<31) },
		func() (err error) { r.Stream, err = optionalBool(m, "stream"); return err },
		func() (err error) { r.IncludeUsage, err = streamOptions(m, r.Stream); return err },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// parseObject requires a JSON object and returns its members.
func parseObject(body []byte) (map[string]json.RawMessage, error) {
	var scratch [24]jsonscan.Member
	members, err := objectMembers(body, scratch[:0])
	if err != nil {
		return nil, err
	}
	return memberMap(members), nil
}

// objectMembers requires a JSON object and appends its members to out.
func objectMembers(body []byte, out []jsonscan.Member) ([]jsonscan.Member, error) {
	members, ok := jsonscan.ValidMembers(body, out)
	if !ok && json.Valid(body) { // the deep nesting ValidMembers refuses
		members, ok = jsonscan.Members(body, out)
	}
	if !ok {
		return nil, &RequestError{Message: "We could not parse the JSON body of your request. The API expects a JSON object " +
			"in the request body; check that the body is valid JSON and the content type is application/json."}
	}
	return members, nil
}

// memberMap maps the members' names to their values, which share the
// body's bytes. When a key repeats, the last one counts, as in
// encoding/json.
func memberMap(members []jsonscan.Member) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(members))
	for _, mb := range members {
		m[memberName(mb)] = json.RawMessage(mb.Value[:len(mb.Value):len(mb.Value)])
	}
	return m
}

// commonMembers are the request members most requests have, as strings
// made once: a request's member map shares them.
var commonMembers = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"model", "messages", "input", "instructions", "stream", "stream_options", "temperature",
		"top_p", "max_tokens", "max_completion_tokens", "max_output_tokens", "n", "stop", "seed", "user", "tools",
		"tool_choice", "parallel_tool_calls", "response_format", "reasoning_effort", "reasoning", "store", "metadata",
		"frequency_penalty", "presence_penalty", "logprobs", "top_logprobs", "encoding_format", "dimensions",
		"prompt", "size", "quality", "style", "previous_response_id", "text", "truncation"} {
		m[k] = k
	}
	return m
}()

// keyIs reports whether a member's key is name.
func keyIs(m jsonscan.Member, name string) bool {
	if bytes.IndexByte(m.Key, '\\') < 0 {
		return string(m.Key) == name
	}
	return memberName(m) == name
}

// memberName is a member's key as a client means it: "mod\u0065l" is
// model.
func memberName(m jsonscan.Member) string {
	if bytes.IndexByte(m.Key, '\\') < 0 {
		if name, ok := commonMembers[string(m.Key)]; ok {
			return name
		}
		return string(m.Key)
	}
	var s string
	json.Unmarshal(append(append([]byte{'"'}, m.Key...), '"'), &s) //nolint:errcheck // valid JSON: the key decodes
	return s
}

func missing(param string) error {
	return &RequestError{Param: param, Code: "missing_required_parameter",
		Message: fmt.Sprintf("Missing required parameter: '%s'.", param)}
}

func wrongType(param, want string, raw json.RawMessage) error {
	return &RequestError{Param: param, Code: "invalid_type",
		Message: fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", param, want, jsonKind(raw))}
}

func invalidValue(param, format string, args ...any) error {
	return &RequestError{Param: param, Code: "invalid_value",
		Message: fmt.Sprintf("Invalid '%s': ", param) + fmt.Sprintf(format, clipArgs(args)...)}
}

func jsonKind(raw json.RawMessage) string {
	switch t := bytes.TrimSpace(raw); {
	case len(t) == 0 || t[0] == 'n':
		return "null"
	case t[0] == '"':
		return "a string"
	case t[0] == '{':
		return "an object"
	case t[0] == '[':
		return "an array"
	case t[0] == 't' || t[0] == 'f':
		return "a boolean"
	}
	return "a number"
}

func requiredString(m map[string]json.RawMessage, name string) (string, error) {
	return stringValue(name, m[name])
}

// stringValue is requiredString of the member name's value raw.
func stringValue(name string, raw json.RawMessage) (string, error) {
	if jsonscan.IsNull(raw) {
		return "", missing(name)
	}
	var s string
	if plain, ok := plainString(raw); ok {
		s = string(plain)
	} else if json.Unmarshal(raw, &s) != nil {
		return "", wrongType(name, "a string", raw)
	}
	if s == "" {
		return "", missing(name)
	}
	return s, nil
}

// plainString returns the contents of a valid JSON string that decodes
// to its own bytes: no escapes, valid UTF-8.
func plainString(raw json.RawMessage) ([]byte, bool) {
	t := jsonscan.TrimSpace(raw)
	if len(t) < 2 || t[0] != '"' || bytes.IndexByte(t, '\\') >= 0 || !utf8.Valid(t) {
		return nil, false
	}
	return t[1 : len(t)-1], true
}

func checkMessages(m map[string]json.RawMessage) error {
	raw := m["messages"]
	if jsonscan.IsNull(raw) {
		return missing("messages")
	}
	// raw is valid JSON (parseMembers): walked, not decoded.
	msgs, ok := jsonscan.Entries(raw, jsonscan.SkipSpace(raw, 0))
	if !ok || msgs.Object {
		return wrongType("messages", "an array", raw)
	}
	i := 0
	for ; ; i++ {
		msg, more := msgs.Next()
		if !more {
			break
		}
		if err := checkMessage(i, msg.Value); err != nil {
			return err
		}
	}
	if i == 0 {
		return invalidValue("messages", "empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	return nil
}

func checkMessage(i int, raw json.RawMessage) error {
	param := func() string { return "messages[" + strconv.Itoa(i) + "]" }
	members, ok := jsonscan.Entries(raw, 0)
	if !ok || !members.Object {
		return wrongType(param(), "an object", raw)
	}
	var role json.RawMessage // the last one counts, as in encoding/json
	for {
		m, more := members.Next()
		if !more {
			break
		}
		if keyIs(m, "role") {
			role = m.Value
		}
	}
	if plain, ok := plainString(role); ok && knownRole(plain) {
		return nil
	}
	name, err := stringValue("role", role)
	if err != nil {
		err.(*RequestError).Param = param() + ".role"
		err.(*RequestError).Message = fmt.Sprintf("Missing or invalid '%s.role'.", param())
		return err
	}
	if !slices.Contains(messageRoles, name) {
		return invalidValue(param()+".role", "value: '%s'. Supported values are: %s.", name, quoteList(messageRoles))
	}
	return nil
}

func knownRole(role []byte) bool {
	for _, r := range messageRoles {
		if string(role) == r {
			return true
		}
	}
	return false
}

func quoteList(vs []string) string {
	var b bytes.Buffer
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "'%s'", v)
	}
	return b.String()
}

// numberIn and integerIn check a member's number. Its value is valid
// JSON (objectMembers), which json.Unmarshal would decode into a float64
// or an int64 only if it is a number strconv reads: they read it so,
// without encoding/json's reflection.
func numberIn(m map[string]json.RawMessage, name string, lo, hi float64) error {
	raw := m[name]
	if jsonscan.IsNull(raw) {
		return nil
	}
	t := jsonscan.TrimSpace(raw)
	v, err := strconv.ParseFloat(string(t), 64)
	if jsonscan.Kind(t) != jsonscan.Number || err != nil {
		return wrongType(name, "a number", raw)
	}
	return inRange(name, v, lo, hi, "decimal", raw)
}

func integerIn(m map[string]json.RawMessage, name string, lo, hi float64) error {
	raw := m[name]
	if jsonscan.IsNull(raw) {
		return nil
	}
	t := jsonscan.TrimSpace(raw)
	v, err := strconv.ParseInt(string(t), 10, 64)
	if jsonscan.Kind(t) != jsonscan.Number || err != nil {
		return wrongType(name, "an integer", raw)
	}
	return inRange(name, float64(v), lo, hi, "integer", raw)
}

func inRange(name string, v, lo, hi float64, kind string, raw json.RawMessage) error {
	switch {
	case v < lo:
		return invalidValue(name, "%s below minimum value. Expected a value >= %g, but got %s instead.", kind, lo, bytes.TrimSpace(raw))
	case v > hi:
		return invalidValue(name, "%s above maximum value. Expected a value <= %g, but got %s instead.", kind, hi, bytes.TrimSpace(raw))
	}
	return nil
}

func optionalBool(m map[string]json.RawMessage, name string) (bool, error) {
	return boolValue(name, m[name])
}

// boolValue is optionalBool of the member name's value raw.
func boolValue(name string, raw json.RawMessage) (bool, error) {
	if jsonscan.IsNull(raw) {
		return false, nil
	}
	switch string(jsonscan.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, wrongType(name, "a boolean", raw)
}

// streamOptions validates stream_options and returns include_usage.
func streamOptions(m map[string]json.RawMessage, stream bool) (bool, error) {
	raw := m["stream_options"]
	if jsonscan.IsNull(raw) {
		return false, nil
	}
	it, ok := jsonscan.Entries(raw, jsonscan.SkipSpace(raw, 0))
	if !ok || !it.Object {
		return false, wrongType("stream_options", "an object", raw)
	}
	if !stream {
		return false, &RequestError{Param: "stream_options", Code: "invalid_value",
			Message: "The 'stream_options' parameter is only allowed when 'stream' is enabled."}
	}
	var include json.RawMessage // the last one counts, as in encoding/json
	for {
		m, more := it.Next()
		if !more {
			break
		}
		if keyIs(m, "include_usage") {
			include = m.Value
		}
	}
	v, err := boolValue("include_usage", include)
	if err != nil {
		err.(*RequestError).Param = "stream_options.include_usage"
	}
	return v, err
}
