package anthropic

import (
	"encoding/json"
	"strconv"
	"strings"
)

// StructuredOutputs reports whether a Claude model answers a JSON schema
// natively (output_config.format, constrained decoding): Claude Opus,
// Sonnet and Haiku 4.5 and later, as Anthropic and Amazon Bedrock serve
// them. It reads the version from the model id in any of its spellings
// (claude-sonnet-4-5, claude-sonnet-4-5-20250929, claude-opus-4-6@…,
// us.anthropic.claude-haiku-4-5-20251001-v1:0); ids of the older naming
// (claude-3-7-sonnet) and unknown families are not.
func StructuredOutputs(model string) bool {
	_, rest, ok := strings.Cut(model, "claude-")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "-")
	if len(parts) < 2 || parts[0] != "opus" && parts[0] != "sonnet" && parts[0] != "haiku" {
		return false
	}
	major, err := strconv.Atoi(strings.SplitN(parts[1], "@", 2)[0])
	if err != nil {
		return false
	}
	minor := 0
	if len(parts) > 2 {
		m := strings.SplitN(parts[2], "@", 2)[0]
		if v, err := strconv.Atoi(m); err == nil && len(m) <= 2 { // not a date
			minor = v
		}
	}
	return major > 4 || major == 4 && minor >= 5
}

// StrictSchema is schema as structured outputs take it: every object
// schema closed (additionalProperties false), as OpenAI's strict mode
// has them; a schema that sets additionalProperties keeps its own. A
// schema that is not JSON is returned as it is, for the provider to
// refuse.
func StrictSchema(schema json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(schema, &v) != nil {
		return schema
	}
	b, err := json.Marshal(closeObjects(v))
	if err != nil {
		return schema
	}
	return b
}

// closeObjects closes every object schema in v: the schema itself and
// those it holds (properties, items, $defs, anyOf and the like).
func closeObjects(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			x[k] = closeObjects(sub)
		}
		if _, set := x["additionalProperties"]; !set && (x["type"] == "object" || x["properties"] != nil) {
			x["additionalProperties"] = false
		}
	case []any:
		for i, sub := range x {
			x[i] = closeObjects(sub)
		}
	}
	return v
}
