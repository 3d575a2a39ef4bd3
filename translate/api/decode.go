package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"modelgate/translate/jsonscan"
	"reflect"
	"strconv"
	"strings"
)

// Helpers for translators to other wire formats: they read the validated
// request into their own view of it and share the OpenAI-side rules.

// Decode reads the request's members into v, a translator's view of the
// chat completions request. A member of the wrong shape is a RequestError
// naming the member, in OpenAI's words (never encoding/json's, which name
// Go types).
func (r *ChatRequest) Decode(v any) error {
	raw, err := json.Marshal(r.Members)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return decodeError(raw, err)
	}
	return nil
}

// decodeError turns an encoding/json error decoding the client's JSON
// doc into a RequestError.
func decodeError(doc []byte, err error) *RequestError {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return &RequestError{Code: "invalid_type", Message: "The request does not match the chat completions schema."}
	}
	param := pathAt(doc, te.Offset)
	if param == "" {
		param = te.Field
	}
	param = Clip(param, maxQuoted)
	got := "a value of another type"
	switch kind, _, _ := strings.Cut(te.Value, " "); kind {
	case "string":
		got = "a string"
	case "number":
		got = "a number"
	case "bool":
		got = "a boolean"
	case "array":
		got = "an array"
	case "object":
		got = "an object"
	}
	msg := "Invalid type for '" + param + "': expected " + goKind(te.Type) + ", but got " + got + " instead."
	if param == "" {
		msg = "Invalid type in the request: expected " + goKind(te.Type) + ", but got " + got + " instead."
	}
	return &RequestError{Param: param, Code: "invalid_type", Message: msg}
}

// goKind names what a Go type decodes from, in JSON's words.
func goKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// pathAt is the path (such as messages[2].content) of the value of the
// compact JSON doc at which encoding/json reports a type error: the value
// whose first token ends at byte offset off (a scalar's end, just after
// the bracket of an object or array). It is "" when there is none.
func pathAt(doc []byte, off int64) string {
	type frame struct {
		object  bool
		wantKey bool
		key     string
		index   int
	}
	var stack []frame
	next := func() { // a value of the innermost container ended
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		d, isDelim := tok.(json.Delim)
		if n := len(stack); n > 0 && (stack[n-1].object && stack[n-1].wantKey || d == ']') {
			if isDelim { // } or ]
				stack = stack[:n-1]
				next()
				continue
			}
			stack[n-1].key, _ = tok.(string)
			stack[n-1].wantKey = false
			continue
		}
		if dec.InputOffset() == off {
			var b strings.Builder
			for _, f := range stack {
				if f.object {
					if b.Len() > 0 {
						b.WriteByte('.')
					}
					b.WriteString(f.key)
				} else {
					b.WriteString("[" + strconv.Itoa(f.index) + "]")
				}
			}
			return b.String()
		}
		if isDelim {
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
			continue
		}
		next()
	}
}

// maxQuoted bounds the client text an error message quotes.
const maxQuoted = 256

// Invalid is a RequestError with code invalid_value. String arguments
// (the client's values, usually) are cut to a few hundred bytes.
func Invalid(param, format string, args ...any) error {
	return &RequestError{Param: param, Code: "invalid_value", Message: fmt.Sprintf(format, clipArgs(args)...)}
}

// clipArgs bounds the text arguments of an error message.
func clipArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = Clip(v, maxQuoted)
		case []byte:
			out[i] = Clip(string(v), maxQuoted)
		case json.RawMessage:
			out[i] = Clip(string(v), maxQuoted)
		default:
			out[i] = a
		}
	}
	return out
}

// quote is %q of a client's text, bounded: at most maxQuoted bytes of it
// are quoted, followed by "…" when there is more.
func quote(s string) string {
	q := strconv.Quote(Clip(s, maxQuoted))
	if len(q) <= 2*maxQuoted {
		return q
	}
	// Escapes made it long: quote fewer characters.
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		e := strconv.Quote(string(r))
		e = e[1 : len(e)-1]
		if b.Len()+len(e) > 2*maxQuoted {
			b.WriteString("…")
			break
		}
		b.WriteString(e)
	}
	b.WriteByte('"')
	return b.String()
}

// StopSequences reads stop: a string or an array of strings.
func StopSequences(raw json.RawMessage) ([]string, error) {
	if jsonscan.IsNull(raw) {
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
	File struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
	// CacheControl is a prompt caching marker on the part, as Anthropic
	// takes it ({"type": "ephemeral", "ttl": "1h"}), kept as sent.
	CacheControl json.RawMessage `json:"cache_control"`
}

// IsMarker reports whether raw is a cache_control marker: set, not null.
func IsMarker(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// FileData reads a file part's content, which a provider other than
// OpenAI can take only inline: file_data, a base64 data URI. A file_id
// names a file of OpenAI's Files API, which no other provider reads.
// param names the part, such as messages[0].content[1].
func (p ContentPart) FileData(param string) (mediaType, data string, err error) {
	if p.File.FileData == "" {
		if p.File.FileID != "" {
			return "", "", Invalid(param+".file.file_id", "A file_id names a file of OpenAI's Files API, which this provider cannot read; send the file as file_data.")
		}
		return "", "", Invalid(param+".file.file_data", "A file part needs file_data: data:<media type>;base64,<data>.")
	}
	mediaType, data, ok := DataURI(p.File.FileData)
	if !ok {
		return "", "", Invalid(param+".file.file_data", "file_data must be a base64 data URI: data:<media type>;base64,<data>.")
	}
	return mediaType, data, nil
}

// TextContent reads content that must be text: a string, or text parts
// joined. param names the message, such as messages[2].
func TextContent(param string, raw json.RawMessage) (string, error) {
	text, _, err := textParts(param, raw)
	return text, err
}

// textParts is TextContent with the parts it read (none for a string).
func textParts(param string, raw json.RawMessage) (string, []ContentPart, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var parts []ContentPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", nil, &RequestError{Param: param + ".content", Code: "invalid_type", Message: "Expected a string or an array of text parts."}
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", nil, Invalid(param+".content", "Only text parts are allowed here, got '%s'.", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), parts, nil
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
