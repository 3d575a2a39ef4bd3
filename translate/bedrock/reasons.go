package bedrock

import "strings"

// Reasons reports whether the model reasons when asked to: Claude does
// (extended thinking); the Converse translator refuses reasoning_effort
// for every other model (setReasoning).
func Reasons(model string) bool { return strings.Contains(model, "anthropic.claude") }
