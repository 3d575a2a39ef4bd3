package bedrock

import "strings"

// Reasons reports whether the model reasons when asked to: Claude does
// (extended thinking); the Converse translator refuses reasoning_effort
// for every other model (setReasoning), and the gateway refuses or drops
// reasoning for them first (providers.Provider.Reasons).
func Reasons(model string) bool { return strings.Contains(model, "anthropic.claude") }
